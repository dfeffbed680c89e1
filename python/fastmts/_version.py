"""fastmts's version: the one place it is written (pyproject.toml reads it here).

Every change of it has its entry in CHANGELOG.md.
"""
__version__ = '0.1.0'

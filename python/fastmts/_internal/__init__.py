"""fastmts's internals: how the public modules do their work, not API.

The package's top level holds what a user of TF finds in
tf.compat.v1.train (monitored_session, basic_session_run_hooks,
session_run_hook, coordinator, queue_runner, session_manager, the session
creators and layers) and fastmts's own features (the public names of
fastmts/__init__.py); what they are built from lives here and may change
between versions.
"""

"""TF's file formats as fastmts writes them: the area that turns messages
into bytes on disk, apart from the session and its hooks.

- `graph_io`: tf.io.write_graph with the protobuf text format printed
  natively (cpp/core/file_formats/text_format.h); `text_format_schema`: the
  message tables that printer reads.
- `event_file_writer`: TF's EventFileWriter over the native writer thread
  (cpp/core/file_formats/event_writer.h, TFRecord framing in event_file.h);
  `graph_events`: a FileWriter's graph records from one GraphDef.
- `graph_files`: the graph files of a session's start (graph.pbtxt, the
  graph records, the first .meta) written in a background thread.

Modules are named as TF names its own where TF has one.
"""

"""Shards: pieces of data files that can be read independently, and their readers.

A :class:`Shard` is a descriptor, not data: a file plus a region of it (Parquet row groups, or a byte range of
a JSON Lines file aligned to line ends), so that ``num_proc``, ``split_dataset_by_node``, DataLoader workers and
a distributed engine can divide one big file. Row numbers always count rows from the start of the *file*,
whichever shard reads them, so ids built from them do not depend on how a file was cut.

* Parquet: one shard per group of row groups in file order (at most ``target_bytes`` of uncompressed data;
  a larger row group is a shard of its own; a split's groups may skip other splits'). Planning reads the footer
  only.
* JSON Lines (``.jsonl``, uncompressed): byte ranges of ``target_bytes``. A range owns the lines that *start*
  in it; the reader of a later range counts the newlines before it to number its rows (a scan, no parsing),
  unless the range was planned from the rows themselves and carries the number of its first line
  (``first_row``: ToolMind's splits, planned row by row).
* Everything else (``.json`` documents, compressed files): one shard per file. A JSON array larger than
  :data:`ARRAY_WHOLE_BYTES` is read a block at a time, so its memory does not grow with the file. Where
  workers will divide the shards (prepare with ``num_proc``), a local uncompressed array larger than
  ``target_bytes`` is cut between elements instead (:func:`cut_documents`: one reading pass first).

A stream's ``IterableDataset.reshard()`` asks for more, smaller shards (:func:`resharded`): single row groups,
byte ranges and array pieces of a quarter of ``target_bytes``.

Readers yield :class:`RawBatch` lists of ``(row number, native row or error)``: a row that cannot even be
parsed is yielded as a :class:`~tooluse_datasets.errors.ToolUseDataError`, so the error policy decides.

Modules: :mod:`.shard` (Shard, RawBatch), :mod:`.plan` (planning), :mod:`.paths` (file names),
:mod:`.files` (opening files: compression, archives), :mod:`.reading` (read_shard, by kind) and the readers
:mod:`.parquet`, :mod:`.lines` and :mod:`.documents` (JSON documents and arrays), which share
:mod:`.json_text` (what a JSON file holds instead) and :mod:`.batches` (regrouping batches). Nothing is
re-exported here: a name is imported from the module that defines it, and a setting such as
:data:`~.documents.ARRAY_WHOLE_BYTES` is changed (or patched by a test) in the module that reads it.
"""

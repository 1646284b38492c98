"""The ``turkflow`` command: ``main`` is the group and its core commands (db, tasks, batch, worker,
simulate), ``review``, ``dataset``, ``prolific`` and ``mturk`` add their subcommands, ``common`` is the
plumbing they share (settings, sessions, one-line errors, money, tables)."""

"""What each role sees, answers and does, one folder per protocol family: ``questions`` (every protocol's
questions as data), ``registry`` (the event-logged protocols and what each provides), ``surveys`` (end-of-dialog
questions), ``wot`` (the Wizard of Tasks' task documents), ``star/``, ``frames/`` and ``meep/``.

Domain code: nothing here imports Flask, Celery, click, ``workers`` or ``turkflow.web``."""

"""The Wizard of Tasks analysis for any dialog corpus: a turkflow export, SGD or STAR.

``corpora`` turns a corpus into ``Dialogue`` values, ``nlp`` loads spaCy with only the components the
statistics need, ``stats`` and ``patterns`` tally the paper's tables in one streaming pass,
``figures`` and ``report`` draw them, and ``run`` ties these together for ``turkflow analyse``.
"""

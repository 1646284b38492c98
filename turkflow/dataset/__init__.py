"""The dataset out: ``export`` (turkflow's JSON Lines and STAR's format), ``sgd`` (the Schema-Guided Dialogue
format) and ``analysis/`` (the papers' statistics over any of these corpora)."""

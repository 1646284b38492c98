"""Annotation batches: crowd workers label collected turns with a scheme's dialogue acts, slots and values (and
Frames' frame relations), N per turn, with agreement, gold turns, adjudication and the quality monitor."""

"""The trainable part of FoG (Foresight-over-Graph): the foresight triple scorer.

``model``       the torch scorer (triple encoder, scorer, far-to-near feedback)
``features``    triples and texts → tensors, with cached frozen sentence embeddings
``supervision`` triple labels from questions with gold paths (training only)
``train``       the training loop behind ``localkg train fog``
``checkpoint``  saving and loading a trained scorer

The reasoner that uses it is ``localkg.reasoners.fog``.
"""

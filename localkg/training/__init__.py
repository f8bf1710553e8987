"""What both trained scorers (``localkg.fog``'s triple scorer, ``localkg.path_scorer``'s path
scorer) train and load with; each of them keeps only its model and its supervision.

``device``       where a scorer trains and runs
``checkpoints``  a trained model as a file of plain data, written atomically, and read back with
                 one-line errors for a missing, damaged, stale or foreign file
``loop``         the seed, the held-out split and the epoch loop with its per-epoch report and checkpoint
"""

"""Learning materials with a model (the learner registered into knowledge.materials.learning)."""

"""How texts and memories are compared, below every package that compares them: key terms and
folded text (`terms`: duplicates, recall's one-copy rule, consolidation, the reconciler, skill
lessons), when two memories contradict each other (`facts`), and the code rules a model's
merge or summary must pass (`rules`)."""

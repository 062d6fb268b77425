"""A fourth task, added the way the architecture says one is (docs/architecture.md, "Adding a task"): its own
folder and nothing else. Translation faithfulness: does an English translation say only what its source says?"""

"""Dreaming: learn from a fleet's transcripts and propose memory changes with evidence.

- :mod:`.model` — the data passed between stages (sessions, signals, patterns, drafts);
- :mod:`.miners` — the deterministic miners, one plug-in each, and the per-tool failure rules;
- :mod:`.engine` — map (miners) -> reduce (patterns with prevalence) -> decide (thresholds,
  coverage by memory) -> drafts (operations with rationale and evidence), streaming;
- :mod:`.llm` — the model port, its Anthropic / OpenAI-compatible / fake backends and the
  orchestrator that fans sub-agents out over batches of transcripts;
- :mod:`.fleet` — a reproducible synthetic fleet with planted patterns (tests, benchmarks);
- :mod:`.report` — the run report in markdown and JSON.

The run itself (selection, pinning, checkpoints, proposals, revert) is the service's
:class:`memdir.dreams.DreamsMixin`. See docs/dreaming.md.
"""

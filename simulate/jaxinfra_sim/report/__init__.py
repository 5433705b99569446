"""What a simulation shows a person or a program: the terminal's live pod phases, prefixed pod logs and final
table, and the JSON report (`terminal`), the timeline as a trace (`trace`, the Trace Event Format that Perfetto and
speedscope read) and one self-contained HTML page (`html`). It reads the results (`core.results`); nothing below
imports it."""

"""Seed program for HotpotQA: two retrieval hops with a summary after each, then the answer.

retrieve(question) -> summarize -> write the second query -> retrieve -> summarize -> answer.
"""

from __future__ import annotations

from triforge.maestro.program import Program, ProgramBuilder


def hotpotqa_seed(k: int = 7, corpus: str = "default") -> Program:
    b = ProgramBuilder("hotpotqa_two_hop", inputs=["question"], outputs=["answer"],
                       description="Two-hop retrieval: summarize each hop, answer from both summaries.")
    b.retrieve("hop1", query="question", passages="passages_1", titles="titles_1", k=k, corpus=corpus)
    b.llm("summarize_1", inputs={"question": "question", "passages": "passages_1"}, outputs=["summary_1"],
          instruction="Summarize the facts in the passages that help answer the question.")
    b.llm("create_query_2", inputs=["question", "summary_1"], outputs=["query"],
          instruction="Write a search query that finds the missing information needed to answer the "
                      "question, given what the summary already establishes.")
    b.field("query", "str")
    b.retrieve("hop2", query="query", passages="passages_2", titles="titles_2", k=k, corpus=corpus)
    b.llm("summarize_2", inputs={"question": "question", "context": "summary_1", "passages": "passages_2"},
          outputs=["summary_2"],
          instruction="Given the question, the context gathered so far and new passages, summarize the "
                      "facts that help answer the question.")
    b.llm("answer", inputs=["question", "summary_1", "summary_2"], outputs=["answer"],
          instruction="Answer the question from the summaries with a short factoid answer (a few words, "
                      "or yes/no).")
    return b.build()

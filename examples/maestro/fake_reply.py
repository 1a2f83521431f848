"""A fake endpoint for trying `triforge maestro run` without a model.

    triforge llm serve-fake --script examples/maestro/fake_reply.py --port 8765 &
    triforge maestro run --bench hotpotqa --model fake --base-url http://127.0.0.1:8765/v1 --out runs/maestro-demo
"""

from triforge.maestro.placeholder_replies import reply  # noqa: F401  (serve-fake looks up `reply`)

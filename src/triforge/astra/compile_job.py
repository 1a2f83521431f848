"""One compile in a confined one-shot process: `python -m triforge.astra.compile_job` in its workdir.

Reads `job.json` (source, name expressions, NVRTC options) and writes `result.json`; started by
`compile.compile_confined` under the isolation policy with a memory bound and a deadline.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from triforge.astra.compile import compile_here


def main() -> None:
    job = json.loads(Path("job.json").read_text())
    res = compile_here(job["source"], job["names"], job["options"])
    Path("result.json").write_text(json.dumps({"ok": res.ok, "cubin": base64.b64encode(res.cubin).decode(),
                                               "lowered": res.lowered, "log": res.log, "seconds": res.seconds,
                                               "ptx": res.ptx}))


if __name__ == "__main__":
    main()

"""Record the ELBO traces of ``_fits.cases()`` into ``elbo_traces.json``.

Run only to deliberately move the reference (say why in the commit):
``python tests/regression/make_fixture.py``."""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from _fits import case_id, cases, run

if __name__ == "__main__":
    traces = {case_id(c): run(c) for c in cases()}
    path = pathlib.Path(__file__).with_name("elbo_traces.json")
    path.write_text(json.dumps(traces, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(traces)} traces to {path}")

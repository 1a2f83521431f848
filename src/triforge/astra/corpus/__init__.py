"""The lab's own candidate corpora: planted faults, honest rewrites and known hacks per task
(`planted`), and the adversarial corpus grown by hack class (`adversarial`). The tests and
`benchmarks/astra_lab.py` judge them; a user can run them to check a lab installation."""

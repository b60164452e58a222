"""The embedded cluster's controllers: each fed by informers, each owning its state, each writing
only through the in-process client (base.py), as a real control plane's controllers run."""

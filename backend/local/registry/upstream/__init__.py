"""The upstream projects' own rules, one module each, as their source states them: Kubeflow
Trainer v2.3.0 (trainer.py: its webhooks and runtime plugins), JobSet v0.12.0 (jobset.py: its
JobSet and pod webhooks) and KubeRay v1.7.0 (kuberay.py: the operator's RayJob validation). The
strategies register the webhooks on their kinds' rows; the controllers import the same rules."""

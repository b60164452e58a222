"""The 15 steps as data: the lesson's structure, criteria and doc titles kept, the text our own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from backend.lesson.steps import STEP_IDS, STEPS, normalise_id

# The lesson as the project was given it (kept as test data: the cockpit shows its own words).
SEED = Path(__file__).resolve().parent / "data" / "lesson-distributed-training.txt"


def _seed_steps() -> list[dict[str, str]]:
    """Each numbered item of the seed: its explanation, doc title and done-when."""
    items, current = [], None
    for raw in SEED.read_text().splitlines():
        text = raw.strip()
        if re.match(r"^\d+\. ", text):
            current = {"title": text, "why": ""}
            items.append(current)
        elif current is None:
            continue
        elif text.startswith("Explained in: "):
            current["doc"] = text.removeprefix("Explained in: ").split(" (www.kubeflow.org)")[0]
        elif text.startswith("Done when: "):
            current["done"] = text.removeprefix("Done when: ")
        elif "doc" not in current:
            current["why"] += " " + text
    return items


def test_three_setup_steps_then_twelve_steps_in_order():
    assert STEP_IDS == ["setup-1", "setup-2", "setup-3"] + [str(n) for n in range(1, 13)]
    assert [s.number for s in STEPS] == [1, 2, 3] + list(range(1, 13))
    assert [s.kind for s in STEPS if s.kind == "reading"] and \
        {s.id for s in STEPS if s.kind == "reading"} == {"setup-1", "2", "10"}
    for step in STEPS:
        assert all(STEP_IDS.index(n) < STEP_IDS.index(step.id) for n in step.needs), step.id
        # a note for every reading step, and for step 7's "side-by-side note" of its two runs
        assert step.takes_note == (step.kind == "reading" or "note" in step.done_when), step.id


def test_done_when_and_doc_titles_are_the_lessons():
    seed = _seed_steps()
    assert len(seed) == len(STEPS)
    for step, item in zip(STEPS, seed):
        assert step.done_when == item["done"], step.id
        assert step.doc_title == item["doc"], step.id
        assert step.doc_url.startswith("https://www.kubeflow.org/docs/") and step.doc_url.endswith("/")


def test_titles_and_explanations_are_written_anew():
    seed = _seed_steps()
    for step, item in zip(STEPS, seed):
        sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", item["why"]) if len(s.strip()) > 20]
        for sentence in sentences:
            assert sentence not in step.why, f"{step.id} copies the lesson's sentence {sentence!r}"
        assert step.title not in item["title"], step.id


def test_same_doc_title_same_link():
    links: dict[str, str] = {}
    for step in STEPS:
        assert links.setdefault(step.doc_title, step.doc_url) == step.doc_url, step.doc_title


@pytest.mark.parametrize("text,expected", [
    ("3", "3"), ("step-3", "3"), ("step 3", "3"), ("s3", "3"), ("03", "3"),
    ("setup-2", "setup-2"), ("setup 2", "setup-2"), ("Setup2", "setup-2"), ("nope", "nope"),
])
def test_step_ids_people_type(text, expected):
    assert normalise_id(text) == expected


def test_steps_on_the_cluster_teach_the_kubectl_command():
    """Declaring, inspecting and breaking things is kubectl's, on any cluster; the text says how."""
    why = {s.id: s.why for s in STEPS}
    assert "export KUBECONFIG=$(kfcockpit cluster kubeconfig)" in why["setup-2"]
    for step, command in (("setup-2", "kubectl get pods -n kubeflow-system"), ("4", "kubectl get trainjobs,jobsets"),
                          ("4", "kubectl describe trainjob"), ("5", "kubectl get pvc"),
                          ("6", "kubectl apply -f manifests/runtime.yaml"), ("6", "kubectl delete pod"),
                          ("6", "kubectl logs -f -l jobset.sigs.k8s.io/jobset-name=lesson-ddp --prefix"),
                          ("7", "kubectl get volumesnapshots"), ("8", "kubectl get rayjobs"),
                          ("9", "kubectl get pods -o jsonpath"), ("11", "kubectl get pod NAME -o yaml")):
        assert f"`{command}" in why[step], (step, command)
    for step in STEPS:
        assert "[" not in step.why, step.id  # shown as Textual markup: a bracket would be eaten
        assert "kfcockpit get" not in step.why and "kfcockpit apply" not in step.why, step.id


def test_every_link_is_a_current_kfp_v2_page():
    """A KFP v2 lesson reads the v2 docs: the v1 pages the lesson names live under legacy-v1 and
    teach ResourceOp and func_to_container_op, which v2 removed; the card names the v2 page."""
    for step in STEPS:
        assert "legacy-v1" not in step.doc_url, step.id
        if "pipelines/" in step.doc_url and step.doc_page is None:
            assert step.doc_title.split(" | ")[0] in ("Lightweight Python Components",
                                                      "Kubernetes Platform-specific Features",
                                                      "Compile a Pipeline"), step.id

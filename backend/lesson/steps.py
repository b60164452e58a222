"""The lesson's 15 steps as data: 3 setup steps and 12 steps.

Titles and explanations are the project's own words. The structure (which steps, in which order),
each "done when" criterion and each documentation title are the lesson's facts and are kept as
they are; the links are the kubeflow.org pages carrying those titles, or, where the lesson's page
is one of the KFP v1 docs (`legacy-v1`), the v2 page that replaced it, named beside the title. Where a step declares,
inspects or breaks something on the cluster, its explanation ends with the kubectl command that
does it on any cluster, the embedded one included: the cockpit's own commands are for what kubectl
does not do (merged logs that follow replacement pods, checkpoints on a volume, snapshots).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Step(BaseModel):
    id: str  # "setup-1" … "setup-3", "1" … "12"
    section: Literal["Setup", "Steps"]
    number: int  # 1..3 within Setup, 1..12 within Steps
    title: str
    why: str
    doc_title: str  # the lesson's title for the page (a fact kept)
    doc_url: str  # the page's current (KFP v2) address
    doc_page: str | None = None  # the current page's own title, where it is not the lesson's
    done_when: str
    kind: Literal["action", "reading"]  # reading steps are done by a note the learner writes
    needs: list[str] = Field(default_factory=list)  # steps that must be done first
    note_prompt: str | None = None  # what the note must cover: reading steps, and step 7's comparison
    measure: str | None = None  # the command that measures what the note cites (step 10's compare)
    short: str = ""  # the checklist's title: whole in its 20 cells, where the title would be cut

    @property
    def checklist_title(self) -> str:
        return self.short or self.title

    @property
    def takes_note(self) -> bool:
        """Its done-when needs a note the learner writes (every reading step, and step 7)."""
        return self.note_prompt is not None

    @property
    def label(self) -> str:
        """How a person names the step: "setup 2", "step 6"."""
        return f"setup {self.number}" if self.section == "Setup" else f"step {self.number}"


_KF = "https://www.kubeflow.org/docs"
INSTALLING = ("Installing Kubeflow | Kubeflow", f"{_KF}/started/installing-kubeflow/")
TRAINER = ("Kubeflow Trainer | Kubeflow", f"{_KF}/components/trainer/")
TRAINER_OVERVIEW = ("Overview | Kubeflow", f"{_KF}/components/trainer/overview/")
_LIGHTWEIGHT_URL = f"{_KF}/components/pipelines/user-guides/components/lightweight-python-components/"
# The lesson names two KFP v1 pages (now under legacy-v1); this is a KFP v2 lesson, so the link
# goes to the v2 page that replaced each: Python function components are lightweight components,
# and ResourceOp/VolumeOp gave way to kfp-kubernetes' platform-specific features.
FUNCTION_COMPONENTS = ("Building Python function-based components | Kubeflow", _LIGHTWEIGHT_URL,
                       "Lightweight Python Components")
MANIPULATE_RESOURCES = ("Manipulate Kubernetes Resources as Part of a Pipeline | Kubeflow",
                        f"{_KF}/components/pipelines/user-guides/core-functions/platform-specific-features/",
                        "Use Platform-Specific Features")
LIGHTWEIGHT = ("Lightweight Python Components | Kubeflow", _LIGHTWEIGHT_URL)
PLATFORM_FEATURES = ("Kubernetes Platform-specific Features | Kubeflow",
                     f"{_KF}/components/pipelines/reference/kfp-kubernetes/")
COMPILE = ("Compile a Pipeline | Kubeflow",
           f"{_KF}/components/pipelines/user-guides/core-functions/compile-a-pipeline/")


# The checklist's titles: 20 cells hold them whole beside the glyph and number at 80 columns.
SHORT = {
    "setup-1": "Choose the install",
    "setup-2": "Trainer controller",
    "setup-3": "Pipelines SDK",
    "1": "One-step pipeline",
    "2": "Trainer vs PyTorch",
    "3": "DDP on two CPUs",
    "4": "TrainJob from a step",
    "5": "Checkpoint volume",
    "6": "Kill and resume",
    "7": "Snapshot and compare",
    "8": "Ray Train variant",
    "9": "Pinned base image",
    "10": "Trainer or Ray Train",
    "11": "Platform settings",
    "12": "Compile and replay",
}


def _step(id: str, title: str, why: str, doc: tuple[str, ...], done_when: str,
          kind: Literal["action", "reading"] = "action", needs: list[str] | None = None,
          note_prompt: str | None = None, measure: str | None = None) -> Step:
    """One step; its checklist title is SHORT's (the card shows the whole title)."""
    section, number = ("Setup", int(id.split("-")[1])) if id.startswith("setup-") else ("Steps", int(id))
    return Step(id=id, section=section, number=number, title=title, why=why, doc_title=doc[0],
                doc_url=doc[1], doc_page=doc[2] if len(doc) > 2 else None, done_when=done_when, kind=kind,
                needs=needs or [], note_prompt=note_prompt, measure=measure, short=SHORT[id])


STEPS: list[Step] = [
    _step(
        "setup-1",
        "Pick how to install Kubeflow: only the Trainer and Pipelines, on a kind or minikube cluster",
        "Kubeflow is many projects, and the whole platform does not fit on a laptop. This lesson "
        "needs two of them, so install just those, standalone, on a throwaway local cluster with "
        "no cloud account and no GPU. The cockpit's platform choice (the embedded local cluster "
        "or a kube context) is recorded next to your note.",
        INSTALLING,
        "You have written down which install method and which subprojects you will put on the "
        "local cluster.",
        kind="reading",
        note_prompt="Write which install method you chose (standalone components, raw manifests "
                    "or a packaged distribution; on kind or minikube) and which subprojects go on "
                    "the cluster (Kubeflow Trainer, Kubeflow Pipelines).",
    ),
    _step(
        "setup-2",
        "Get the Trainer controller running on the cluster",
        "A TrainJob is only a declaration until a controller acts on it: the controller is what "
        "creates the worker pods, hands each one its rank and peers, and restarts the group. "
        "Every later step relies on it, so check it first. From a shell: `export KUBECONFIG=$(kfcockpit "
        "cluster kubeconfig)` points kubectl at the embedded cluster (skip it on kind), then "
        "`kubectl get pods -n kubeflow-system` shows the controller and `kubectl get "
        "clustertrainingruntimes` the runtimes it offers.",
        TRAINER,
        "The Trainer controller pod reports Running in the local cluster.",
    ),
    _step(
        "setup-3",
        "Install the Pipelines SDK and connect it to the cluster",
        "The training jobs in this lesson are started from pipeline steps, so the SDK must import "
        "and must reach something that runs pipelines: the local runner on the embedded cluster, "
        "the Pipelines endpoint on Kubernetes.",
        FUNCTION_COMPONENTS,
        "Importing the SDK in Python succeeds and it can reach the local Pipelines endpoint.",
    ),
    _step(
        "1",
        "Run a one-step pipeline whose component just prints its inputs",
        "Before any training code, prove the path from your machine to a running component works. "
        "If this passes, later failures are about training, not about plumbing.",
        FUNCTION_COMPONENTS,
        "The run shows as succeeded and the pod log contains the printed inputs.",
        needs=["setup-3"],
    ),
    _step(
        "2",
        "Sort out what the Trainer does and what PyTorch does",
        "In data-parallel training PyTorch averages the gradients inside the processes, while the "
        "platform starts those processes, tells them who their peers are and brings them back "
        "after a failure. Knowing which side owns what tells you where to look when a job stalls. "
        "Once a job runs, `a` in the cockpit (or `kfcockpit explain NAME`) takes a worker pod apart: "
        "each piece with who put it there, and what is left to PyTorch.",
        TRAINER_OVERVIEW,
        "You can list, from memory, what the Trainer does for a job and what it leaves to PyTorch.",
        kind="reading",
        note_prompt="List what the Trainer (the platform) does for a job — e.g. launching the "
                    "worker pods, giving them rank, world size and master address, restarting "
                    "them — and what it leaves to PyTorch — e.g. the process group, the gradient "
                    "all-reduce in DDP, the training loop and checkpoints.",
    ),
    _step(
        "3",
        "Train with DistributedDataParallel in two CPU processes",
        "Each worker keeps a full copy of the model, trains on its own slice of the data and "
        "averages gradients with the other every step, so all copies stay identical. Two CPU "
        "processes on this machine show the mechanism; GPUs on separate nodes change nothing in it.",
        TRAINER_OVERVIEW,
        "The function runs locally in two processes and both print the same loss after each step.",
    ),
    _step(
        "4",
        "Submit the two-worker TrainJob from a pipeline step",
        "A distributed job in Kubeflow Trainer is a declared resource that the controller turns "
        "into worker pods. Declaring it from a pipeline step makes launching it one repeatable "
        "step instead of a command someone types. Watch what the task declared with `kubectl get "
        "trainjobs,jobsets` and `kubectl get pods -l jobset.sigs.k8s.io/jobset-name=NAME`; `kubectl "
        "describe trainjob NAME` ends with its events.",
        MANIPULATE_RESOURCES,
        "Listing the training job resource shows it created, and two worker pods start together "
        "and finish.",
        needs=["setup-2", "1", "3"],
    ),
    _step(
        "5",
        "Give the workers a shared checkpoint volume, created by the pipeline",
        "Pods are disposable and their local disk goes with them. Checkpoints written to a volume "
        "that outlives the pods are what makes recovering from a failure possible. `kubectl get pvc` "
        "shows the claim; `kfcockpit checkpoints VOLUME` lists the files on it, read by a pod of "
        "its own.",
        MANIPULATE_RESOURCES,
        "After a run, checkpoint files are visible on the volume from a separate pod.",
        needs=["4"],
    ),
    _step(
        "6",
        "Kill a worker mid-training and watch the group resume",
        "You only know recovery works once you have seen it. When one worker dies the whole group "
        "stops, so the platform must bring every worker back and they must pick up from the last "
        "checkpoint rather than from scratch. By hand it is `kubectl apply -f manifests/runtime.yaml "
        "-f manifests/volume.yaml -f manifests/trainjob.yaml`, then `kubectl logs -f -l "
        "jobset.sigs.k8s.io/jobset-name=lesson-ddp --prefix` (or `kfcockpit logs lesson-ddp -f`, "
        "which follows the replacement pods too) and `kubectl delete pod` on one worker; the check "
        "counts that job as well. To start that run afresh, give it a new name and a new --ckpt-dir: "
        "under the same ones it resumes from the finished run's checkpoints. A lost machine is slower "
        "to recover from than a deleted pod: after "
        "`kfcockpit node fail NODE` nobody reports the worker's end, so the node turns NotReady "
        "only once its heartbeat is overdue, its pods are evicted after their toleration and the "
        "group comes back on the node left (`kubectl get nodes`, `kubectl describe node NODE`); "
        "either counts here, and `kfcockpit node restore NODE` brings the machine back.",
        MANIPULATE_RESOURCES,
        "The log of the restarted worker reports loading a checkpoint and continues from a later "
        "step than zero.",
        needs=["5"],
    ),
    _step(
        "7",
        "Snapshot the volume after a one-worker and a two-worker run and compare them",
        "A snapshot freezes what a run left behind, so the next run cannot overwrite it. Putting "
        "one worker next to two shows what scaling out actually bought you. `kfcockpit snapshot "
        "create checkpoints NAME` takes one (`kubectl apply -f manifests/snapshots/volumesnapshot.yaml` "
        "declares the same), `kubectl get volumesnapshots` lists them and `kfcockpit snapshot list` "
        "shows the runs' metrics inside; the check finds snapshots you took either way.",
        MANIPULATE_RESOURCES,
        "Two snapshots exist and you have a side-by-side note of final loss and wall time for "
        "both runs.",
        needs=["5"],
        note_prompt="Under the measured table (the run quotes it at the top of the note), write "
                    "what scaling out bought: the final loss and the wall time of the one-worker "
                    "run against the two-worker run, in your own words.",
    ),
    _step(
        "8",
        "Run the same loop with Ray Train from a lightweight component",
        "Ray Train scales the loop from inside Python instead of through a declared job resource. "
        "Running both styles on the same loop makes the difference tangible. On a cluster the "
        "same loop also runs as a KubeRay RayJob: `kubectl apply -f manifests/rayjob.yaml`, then "
        "`kubectl get rayjobs`.",
        LIGHTWEIGHT,
        "The component run succeeds and its log shows two Ray Train workers reporting metrics.",
        needs=["setup-3", "3"],
    ),
    _step(
        "9",
        "Use a pinned base image instead of installing packages at start",
        "Workers that run different framework versions cannot synchronise, and installing packages "
        "in every worker costs time on every start. A pinned image fixes both. `kubectl get pods "
        "-o jsonpath='{..image}'` shows which image the workers run.",
        FUNCTION_COMPONENTS,
        "The worker pods show your pinned image tag and start without a package install phase in "
        "the log.",
        needs=["4"],
    ),
    _step(
        "10",
        "Compare the Trainer and Ray Train and decide which team gets which",
        "Someone running the platform has to recommend one way per kind of user. The Trainer "
        "overview names the problems it was built for; weigh both approaches against them.",
        TRAINER_OVERVIEW,
        "You have a short written comparison covering launch model, failure recovery and who owns "
        "the job definition.",
        kind="reading",
        needs=["6", "8"],
        note_prompt="Compare the two approaches on launch model (declared resource vs Python), "
                    "failure recovery (group restart from a checkpoint vs Ray's failure config) and "
                    "who owns the job definition (platform team vs ML team), and say which one "
                    "you would give to which team.",
        measure="kfcockpit compare",
    ),
    _step(
        "11",
        "Put resource requests, volumes and node selection into the pipeline definition",
        "Settings applied by hand on the cluster vanish with the next run. Written into the "
        "pipeline, they come back every time, for anyone and for CI. Where a GPU would be asked "
        "for, ask for CPU here. `kubectl get pod NAME -o yaml` shows the requests a worker got.",
        PLATFORM_FEATURES,
        "A fresh run from the definition alone produces worker pods with the requests and mounts "
        "you declared.",
        needs=["5"],
    ),
    _step(
        "12",
        "Compile the pipeline to a pinned file and reproduce the run from it",
        "The compiled file is what automation submits, without your laptop's Python around it. "
        "Replaying it on a clean cluster is the nearest local test of how it behaves elsewhere.",
        COMPILE,
        "The run launched from the committed file on a fresh cluster finishes with the same worker "
        "count and a checkpoint on the volume.",
        needs=["11"],
    ),
]

STEP_IDS: list[str] = [s.id for s in STEPS]


def normalise_id(text: str) -> str:
    """Accept "3", "step-3", "step 3", "s3", "setup-2", "setup 2", "setup2"."""
    t = text.strip().lower().replace("_", "-").replace(" ", "-")
    if t.startswith("setup"):
        rest = t[5:].lstrip("-")
        return f"setup-{rest}" if rest.isdigit() else t
    for prefix in ("step-", "step", "s"):
        if t.startswith(prefix) and t[len(prefix):].isdigit():
            return str(int(t[len(prefix):]))
    return str(int(t)) if t.isdigit() else t

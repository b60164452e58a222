"""Who put each piece of a TrainJob's pod there: pure rules over the objects of its chain, each
naming the upstream code that injects the piece (kubeflow/trainer v2.3.0's runtime plugins,
kubernetes-sigs/jobset v0.12.0's controller, Kubernetes' Job controller, scheduler, admission and
device plugins). They read what the objects say, never which cluster they came from, so the
embedded cluster and a real one are explained alike.

A piece no rule claims is "not the platform's" (the person who wrote the TrainJob or the runtime
put it there, or an admission webhook we do not know): the rules never guess.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from backend.anatomy.model import Piece, Source

TRAINER = "kubeflow/trainer v2.3.0 "
JOBSET = "kubernetes-sigs/jobset v0.12.0 "
KUBERNETES = "kubernetes "

TORCH_PLUGIN = Source("torch plugin", TRAINER + "pkg/runtime/framework/plugins/torch/torch.go Torch.EnforceMLPolicy")
JOBSET_PLUGIN = Source("jobset plugin", TRAINER + "pkg/runtime/framework/plugins/jobset/jobset.go JobSet.Build "
                       "(builder.go Trainer: the TrainJob's image, command, args, resourcesPerNode)")
STATUS_PLUGIN = Source("trainjobstatus plugin", TRAINER + "pkg/runtime/framework/plugins/trainjobstatus/"
                       "trainjobstatus.go Status.EnforceMLPolicy")
JOBSET_LABELS = Source("JobSet controller", JOBSET + "pkg/controllers/jobset_controller.go labelAndAnnotateObject")
JOBSET_SUBDOMAIN = Source("JobSet controller", JOBSET + "pkg/controllers/jobset_controller.go constructJob, "
                          "GetSubdomain")
JOBSET_SERVICE = Source("JobSet controller", JOBSET + "pkg/controllers/jobset_controller.go "
                        "createHeadlessSvcIfNecessary")
JOB_CONTROLLER = Source("Job controller", KUBERNETES + "pkg/controller/job/job_controller.go manageJob, "
                        "indexed_job_utils.go addCompletionIndexEnvVariables (Indexed Job: index, hostname)")
JOB_SELECTOR = Source("Job API", KUBERNETES + "pkg/registry/batch/job/strategy.go generateSelector")
SCHEDULER = Source("scheduler", KUBERNETES + "pkg/scheduler/schedule_one.go schedulingCycle, bind (spec.nodeName)")
DEVICE_PLUGIN = Source("device plugin", KUBERNETES + "pkg/kubelet/cm/devicemanager/manager.go Allocate "
                       "(the kubelet asks the resource's device plugin at container start)")
SERVICE_ACCOUNT = Source("ServiceAccount admission", KUBERNETES + "plugin/pkg/admission/serviceaccount/"
                         "admission.go mountServiceAccountToken")
NOT_PLATFORM = Source("not the platform's", "")

# Torch.EnforceMLPolicy's petEnvs and masterEnvVars (constants.TorchEnv*), upserted into the
# trainer's `node` container whatever the runtime or the TrainJob set.
TORCH_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
TRAINER_PORT = 29500  # constants.ContainerTrainerPort: the torch plugin's port for the headless service
STATUS_ENV = ("KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_CA_CERT", "KUBEFLOW_TRAINER_SERVER_TOKEN")
STATUS_VOLUME = "kubeflow-trainer-token"  # trainjobstatus.go tokenVolumeName
JOB_INDEX_ENV = "JOB_COMPLETION_INDEX"
SERVICE_ACCOUNT_VOLUME = "kube-api-access-"  # its generated volume's name prefix
JOBSET_KEYS = ("jobset.sigs.k8s.io/", "alpha.jobset.sigs.k8s.io/")
JOB_KEYS = ("batch.kubernetes.io/", "controller-uid", "job-name")
DEVICE_RESOURCES = ("nvidia.com/", "amd.com/", "google.com/tpu", "habana.ai/", "intel.com/")
TRAINER_CONTAINER = "node"  # constants.Node: the trainer's replicated job's container

# What the framework does, which no object shows: the platform only starts the processes.
FRAMEWORK_PARTS = (
    ("process group", "torchrun turns PET_* into RANK, WORLD_SIZE, MASTER_ADDR; training/ddp.py calls "
                      "torch.distributed.init_process_group (gloo on CPU, NCCL on GPUs)"),
    ("gradient all-reduce", "DistributedDataParallel averages the gradients in every step's backward"),
    ("checkpoint", "training/checkpoint.py saves and resumes; the volume only keeps the files"),
    ("resume after a restart", "the new group's code loads the newest checkpoint; the platform only made new pods"),
)


def runtime_source(runtime: dict | None) -> Source:
    kind = (runtime or {}).get("kind") or "TrainingRuntime"
    name = ((runtime or {}).get("metadata") or {}).get("name") or "?"
    return Source(f"{kind} {name}", TRAINER + "pkg/runtime/core/trainingruntime.go newRuntimeInfo (the runtime's "
                  "template is the JobSet's)")


def patch_source(manager: str) -> Source:
    return Source(manager, TRAINER + "pkg/runtime/core/trainingruntime.go TrainingRuntime.mergeRuntimePatches "
                  "(runtimePatches[].manager)")


def trainjob_source() -> Source:
    return Source("TrainJob spec.trainer", TORCH_PLUGIN.code + " (upserts spec.trainer.env)")


# ---------------------------------------------------------------------- what the objects declare

def _pod_templates(spec_template: dict) -> Iterator[dict]:
    """The pod specs of a runtime's (or a patch's) `template`, every replicated job's."""
    for rjob in ((spec_template.get("spec") or {}).get("replicatedJobs") or []):
        yield (((rjob.get("template") or {}).get("spec") or {}).get("template") or {})


def _declared(template: dict) -> dict[str, set[str]]:
    """What a runtime's or a patch's template puts in a pod: env names, volume names, mount paths,
    label and annotation keys."""
    out: dict[str, set[str]] = {"env": set(), "volume": set(), "mount": set(), "label": set(), "annotation": set()}
    for pod in _pod_templates(template):
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        out["label"] |= set(meta.get("labels") or {})
        out["annotation"] |= set(meta.get("annotations") or {})
        out["volume"] |= {v.get("name") for v in spec.get("volumes") or []}
        for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
            out["env"] |= {e.get("name") for e in container.get("env") or []}
            out["mount"] |= {m.get("mountPath") for m in container.get("volumeMounts") or []}
    return out


class Declarations:
    """Who declared what a pod holds: the runtime, then each patch's manager over it (a later
    patch's wins, as the Trainer applies them in order), then the TrainJob's trainer.env."""

    def __init__(self, trainjob: dict, runtime: dict | None) -> None:
        self.layers: list[tuple[Source, dict[str, set[str]]]] = [
            (runtime_source(runtime), _declared(((runtime or {}).get("spec") or {}).get("template") or {}))]
        for patch in (trainjob.get("spec") or {}).get("runtimePatches") or []:
            template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
            self.layers.append((patch_source(str(patch.get("manager") or "?")), _declared(template)))
        trainer_env = {e.get("name") for e in ((trainjob.get("spec") or {}).get("trainer") or {}).get("env") or []}
        self.layers.append((trainjob_source(), {"env": trainer_env}))

    def source(self, kind: str, name: str) -> Source | None:
        found = None
        for source, declared in self.layers:
            if name in declared.get(kind, ()):
                found = source
        return found


# ---------------------------------------------------------------------- the rules, one per piece kind

def env_source(name: str, declared: Declarations) -> Source:
    if name in TORCH_ENV:
        return TORCH_PLUGIN
    if name in STATUS_ENV:
        return STATUS_PLUGIN
    if name == JOB_INDEX_ENV:
        return JOB_CONTROLLER
    return declared.source("env", name) or NOT_PLATFORM


def volume_source(name: str, declared: Declarations) -> Source:
    if name == STATUS_VOLUME:
        return STATUS_PLUGIN
    if name.startswith(SERVICE_ACCOUNT_VOLUME):
        return SERVICE_ACCOUNT
    return declared.source("volume", name) or NOT_PLATFORM


def mount_source(path: str, volume: str, declared: Declarations) -> Source:
    return declared.source("mount", path) or volume_source(volume, declared)


def meta_source(kind: str, key: str, declared: Declarations) -> Source:
    """A pod's label or annotation: JobSet's and the Job's own keys, else the template's layer."""
    if key.startswith(JOBSET_KEYS):
        return JOBSET_LABELS
    if key.startswith(JOB_KEYS):
        return JOB_SELECTOR if kind == "label" and not key.endswith("job-completion-index") else JOB_CONTROLLER
    return declared.source(kind, key) or NOT_PLATFORM


def _env_value(env: dict) -> str:
    if "value" in env:
        return str(env["value"])
    ref = (env.get("valueFrom") or {}).get("fieldRef") or {}
    return f"from {ref['fieldPath']}" if ref.get("fieldPath") else "from " + ",".join(env.get("valueFrom") or {})


def pod_pieces(pod: dict, trainjob: dict, runtime: dict | None, jobset: dict | None,
               service_missing: str = "") -> list[Piece]:
    """Each piece of `pod` the platform put there, with who did it, in the order a person reads a
    pod: its trainer container's env and ports, volumes and mounts, network, node and devices,
    labels and annotations. `service_missing`: why the headless Service was not read, if not."""
    declared = Declarations(trainjob, runtime)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    containers = spec.get("containers") or []
    trainer = next((c for c in containers if c.get("name") == TRAINER_CONTAINER), containers[0] if containers else {})
    pieces = [Piece("env", e.get("name", ""), _env_value(e), env_source(e.get("name", ""), declared))
              for e in trainer.get("env") or []]
    pieces += [Piece("container", field, shown_value, JOBSET_PLUGIN) for field, shown_value in _trainer_fields(
        trainer, (trainjob.get("spec") or {}).get("trainer") or {})]
    pieces += [Piece("port", str(p.get("containerPort")), "the trainer's port for the headless service",
                     TORCH_PLUGIN if p.get("containerPort") == TRAINER_PORT else NOT_PLATFORM)
               for p in trainer.get("ports") or []]
    for volume in spec.get("volumes") or []:
        name = volume.get("name", "")
        pieces.append(Piece("volume", name, _volume_value(volume), volume_source(name, declared)))
    for mount in trainer.get("volumeMounts") or []:
        path, name = mount.get("mountPath", ""), mount.get("name", "")
        pieces.append(Piece("mount", path, f"volume {name}" + (" (read-only)" if mount.get("readOnly") else ""),
                            mount_source(path, name, declared)))
    pieces += list(_network(meta, spec, jobset, service_missing))
    pieces += list(_placement(spec, containers))
    for kind, values in (("label", meta.get("labels") or {}), ("annotation", meta.get("annotations") or {})):
        pieces += [Piece(kind, key, str(value), meta_source(kind, key, declared))
                   for key, value in sorted(values.items())]
    return pieces


def _trainer_fields(container: dict, trainer: dict) -> Iterator[tuple[str, str]]:
    """The trainer container's fields the TrainJob's spec.trainer set (jobset plugin's Build)."""
    for field in ("image", "command", "args"):
        if trainer.get(field) is not None and container.get(field) is not None:
            value = container[field]
            yield field, value if isinstance(value, str) else " ".join(str(v) for v in value)
    per_node = trainer.get("resourcesPerNode") or {}
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        if per_node.get(part) and resources.get(part):
            yield f"resources.{part}", ", ".join(f"{k}={v}" for k, v in sorted(resources[part].items()))


def _volume_value(volume: dict) -> str:
    if "persistentVolumeClaim" in volume:
        return f"claim {volume['persistentVolumeClaim'].get('claimName', '?')}"
    kinds = [k for k in volume if k != "name"]
    return kinds[0] if kinds else "?"


def _network(meta: dict, spec: dict, jobset: dict | None, service_missing: str) -> Iterable[Piece]:
    """The pod's DNS name: its hostname (the Indexed Job's) in the JobSet's subdomain, which its
    headless Service of that name serves (what PET_MASTER_ADDR names for rank 0)."""
    if spec.get("hostname"):
        yield Piece("network", "hostname", spec["hostname"], JOB_CONTROLLER)
    if spec.get("subdomain"):
        yield Piece("network", "subdomain", spec["subdomain"], JOBSET_SUBDOMAIN)
        if spec.get("hostname"):
            namespace = meta.get("namespace") or "default"
            yield Piece("network", "DNS name", f"{spec['hostname']}.{spec['subdomain']}.{namespace}.svc",
                        JOBSET_SUBDOMAIN)
        what = service_missing or (f"clusterIP None, selector jobset-name="
                                   f"{((jobset or {}).get('metadata') or {}).get('name', '?')}")
        yield Piece("network", "headless Service", f"{spec['subdomain']} ({what})", JOBSET_SERVICE)


def _placement(spec: dict, containers: list[dict]) -> Iterable[Piece]:
    yield Piece("node", "node", spec.get("nodeName") or "not scheduled yet", SCHEDULER)
    devices = {}
    for container in containers:
        for resource, count in ((container.get("resources") or {}).get("limits") or {}).items():
            if resource.startswith(DEVICE_RESOURCES):
                devices[resource] = devices.get(resource, 0) + int(count)
    if not devices:
        yield Piece("device", "devices", "none requested (CPU: gloo)", DEVICE_PLUGIN)
    for resource, count in sorted(devices.items()):
        yield Piece("device", resource, f"{count}, chosen by the node's device plugin at start", DEVICE_PLUGIN)

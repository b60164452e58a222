"""The label keys pods are found by, the same on the embedded cluster as upstream, so a selector
or a rank read here works on either platform."""

# Labels every pod carries, on both platforms (the same keys Kubeflow Trainer/JobSet set).
LABEL_JOB = "jobset.sigs.k8s.io/jobset-name"
LABEL_JOB_UID = "jobset.sigs.k8s.io/jobset-uid"  # JobSet's labelAndAnnotateObject, on every pod
LABEL_RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
LABEL_RANK = "batch.kubernetes.io/job-completion-index"
# Pod.rank of a pod that has no rank: a RayJob's driver (its LABEL_RANK is "driver").
DRIVER_RANK = -1
# What KubeRay v1.7.0 puts on the pods of a RayJob (ray-operator/controllers/ray/utils/constant.go).
# The Ray cluster's pods (common/pod.go labelPod) carry the cluster, node type and group; the
# RayCluster's own ray.io/originated-from-* labels do not reach them. Only the submitter Job's pod
# (rayjob_controller.go getSubmitterTemplate) names the RayJob.
RAY_LABEL_CLUSTER = "ray.io/cluster"
RAY_LABEL_NODE_TYPE = "ray.io/node-type"  # "head" or "worker"
RAY_LABEL_GROUP = "ray.io/group"  # "headgroup" on the head, else the worker group's name
RAY_LABEL_ORIGINATED_NAME = "ray.io/originated-from-cr-name"  # the RayJob's name (submitter pod)
RAY_LABEL_ORIGINATED_CRD = "ray.io/originated-from-crd"  # "RayJob"
# Only with the RayMultihostIndexing feature gate (common/pod.go DefaultWorkerPodTemplate).
RAY_LABEL_REPLICA_INDEX = "ray.io/worker-group-replica-index"
# This project's own, not upstream's: the embedded kubelet stops every process of a running pod
# carrying it with "true" (SIGSTOP), and continues them once it is gone (`kfcockpit pod freeze`).
FREEZE_ANNOTATION = "kfcockpit.io/frozen"
# Also this project's: the embedded kubelet runs a running pod's processes at this factor of their
# speed (0 < factor < 1; a straggler), and at full speed once it is gone (`kfcockpit pod slow`).
SLOW_ANNOTATION = "kfcockpit.io/slow"

#!/usr/bin/env bash
# Install what the lesson needs on the current kube context (kind, minikube or any cluster).
#
#   manifests/install/install.sh                 everything below, in this order
#   manifests/install/install.sh trainer         Kubeflow Trainer v2.3.0 (manager + JobSet), then, once
#                                                the controller is Available, its runtimes and the
#                                                lesson's TrainingRuntime (manifests/runtime.yaml)
#   manifests/install/install.sh snapshots       external-snapshotter v8.6.0 CRDs + snapshot controller,
#                                                csi-driver-host-path v1.18.0, its StorageClass (made the
#                                                default) and VolumeSnapshotClass: kind's own `standard`
#                                                class cannot snapshot
#   manifests/install/install.sh nfs             csi-driver-nfs v4.11.0, its example in-cluster NFS server
#                                                and the ReadWriteMany class nfs-csi the lesson's
#                                                checkpoint volume asks for (manifests/nfs/)
#   manifests/install/install.sh kuberay         KubeRay v1.7.0 (CRDs + operator, ray-system): RayJobs
#   manifests/install/install.sh pipelines       Kubeflow Pipelines 2.17.0, platform-agnostic
#   manifests/install/install.sh image           build kfcockpit-base:0.1.0 and load it into kind
#
# Environment: NAMESPACE (the lesson's namespace, default: default), KIND_CLUSTER (default: kind),
# KUBECTL (default: kubectl). Every step can be run again safely.
set -euo pipefail

TRAINER_VERSION=v2.3.0
PIPELINES_VERSION=2.17.0
SNAPSHOTTER_VERSION=v8.6.0
HOSTPATH_VERSION=v1.18.0
NFS_VERSION=v4.11.0
KUBERAY_VERSION=v1.7.0
BASE_IMAGE=kfcockpit-base:0.1.0

NAMESPACE=${NAMESPACE:-default}
KIND_CLUSTER=${KIND_CLUSTER:-kind}
KUBECTL=${KUBECTL:-kubectl}
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

say() { printf '\n== %s\n' "$*"; }

install_trainer() {
  say "Kubeflow Trainer $TRAINER_VERSION: controller manager and JobSet"
  $KUBECTL apply --server-side -k "$HERE/trainer"
  $KUBECTL -n kubeflow-system wait --for=condition=Available --timeout=300s \
    deployment/kubeflow-trainer-controller-manager deployment/jobset-controller-manager
  say "Kubeflow Trainer $TRAINER_VERSION: runtimes (the controller's webhook is up now)"
  $KUBECTL apply --server-side -k "$HERE/trainer-runtimes"
  install_runtime
}

install_runtime() {
  say "the lesson's TrainingRuntime in namespace $NAMESPACE"
  $KUBECTL get namespace "$NAMESPACE" >/dev/null 2>&1 || $KUBECTL create namespace "$NAMESPACE"
  $KUBECTL apply -n "$NAMESPACE" -f "$ROOT/manifests/runtime.yaml"
}

install_snapshots() {
  say "external-snapshotter $SNAPSHOTTER_VERSION: CRDs and snapshot controller"
  $KUBECTL apply --server-side -k "$HERE/snapshots/crds"
  $KUBECTL wait --for=condition=Established --timeout=60s \
    crd/volumesnapshots.snapshot.storage.k8s.io crd/volumesnapshotclasses.snapshot.storage.k8s.io \
    crd/volumesnapshotcontents.snapshot.storage.k8s.io
  $KUBECTL apply --server-side -k "$HERE/snapshots/controller"
  $KUBECTL -n kube-system wait --for=condition=Available --timeout=300s deployment/snapshot-controller

  say "csi-driver-host-path $HOSTPATH_VERSION"
  # A subshell owns the checkout and its cleanup: a RETURN trap would stay set after this
  # function and fire again, under `set -u`, when main returns (src unbound there).
  (
    src="$(mktemp -d)"
    trap 'rm -rf "$src"' EXIT
    git clone --quiet --depth 1 --branch "$HOSTPATH_VERSION" \
      https://github.com/kubernetes-csi/csi-driver-host-path "$src"
    "$src/deploy/kubernetes-latest/deploy.sh"
  )

  say "StorageClass csi-hostpath-sc (default) and VolumeSnapshotClass csi-hostpath-snapclass"
  # Only one default StorageClass: kind's `standard` (rancher.io/local-path) stops being it.
  for class in $($KUBECTL get storageclass -o name); do
    [ "$class" = storageclass.storage.k8s.io/csi-hostpath-sc ] && continue
    $KUBECTL annotate --overwrite "$class" storageclass.kubernetes.io/is-default-class=false
  done
  $KUBECTL apply -f "$ROOT/manifests/snapshots/storageclass.yaml"
  $KUBECTL apply -f "$ROOT/manifests/snapshots/volumesnapshotclass.yaml"
}

install_nfs() {
  say "csi-driver-nfs $NFS_VERSION and its example NFS server (namespace default)"
  (
    src="$(mktemp -d)"
    trap 'rm -rf "$src"' EXIT
    git clone --quiet --depth 1 --branch "$NFS_VERSION" https://github.com/kubernetes-csi/csi-driver-nfs "$src"
    cd "$src"
    ./deploy/install-driver.sh "$NFS_VERSION" local
    $KUBECTL apply -f deploy/example/nfs-provisioner/nfs-server.yaml
  )
  $KUBECTL wait --for=condition=Available --timeout=300s deployment/nfs-server
  say "StorageClass nfs-csi (ReadWriteMany) and VolumeSnapshotClass csi-nfs-snapclass"
  $KUBECTL apply -f "$ROOT/manifests/nfs/storageclass.yaml"
}

install_kuberay() {
  say "KubeRay $KUBERAY_VERSION: RayJob CRDs and the operator"
  $KUBECTL apply --server-side -k "$HERE/kuberay"
  $KUBECTL -n ray-system wait --for=condition=Available --timeout=300s deployment/kuberay-operator
}

install_pipelines() {
  say "Kubeflow Pipelines $PIPELINES_VERSION (platform-agnostic)"
  $KUBECTL apply -k "$HERE/pipelines/cluster-scoped"
  $KUBECTL wait --for=condition=Established --timeout=60s crd/applications.app.k8s.io
  $KUBECTL apply -k "$HERE/pipelines/platform-agnostic"
  say "waiting for Pipelines to be Available (a few minutes; pods restarting meanwhile is normal)"
  $KUBECTL -n kubeflow wait --for=condition=Available --timeout=900s deployment --all
  say "the lesson's pipeline tasks run in namespace kubeflow: its runtime and permissions there"
  $KUBECTL apply -n kubeflow -f "$ROOT/manifests/runtime.yaml"
  $KUBECTL apply -f "$HERE/pipeline-runner-rbac.yaml"
  echo "Pipelines endpoint: $KUBECTL port-forward -n kubeflow svc/ml-pipeline-ui 8080:80"
}

install_image() {
  say "the base image $BASE_IMAGE, loaded into kind cluster $KIND_CLUSTER"
  docker build -f "$ROOT/manifests/image/Dockerfile" -t "$BASE_IMAGE" "$ROOT"
  kind load docker-image "$BASE_IMAGE" --name "$KIND_CLUSTER"
}

main() {
  local steps=("$@")
  [ ${#steps[@]} -eq 0 ] && steps=(trainer snapshots nfs kuberay pipelines image)
  for step in "${steps[@]}"; do
    case "$step" in
      trainer) install_trainer ;;
      runtime) install_runtime ;;
      snapshots) install_snapshots ;;
      nfs) install_nfs ;;
      kuberay) install_kuberay ;;
      pipelines) install_pipelines ;;
      image) install_image ;;
      *) echo "install.sh: unknown step '$step' (trainer, runtime, snapshots, nfs, kuberay, pipelines, image)" >&2; exit 2 ;;
    esac
  done
  say "done: kfcockpit cluster status --context \$(kubectl config current-context) -n $NAMESPACE"
}

main "$@"

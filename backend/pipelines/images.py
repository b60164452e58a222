"""The pinned base image every component and every TrainJob worker runs (lesson step 9).

It holds exactly the versions in manifests/image/requirements.lock plus this project, so a task
starts without installing anything. manifests/runtime.yaml names the same tag for the workers.
Its CUDA variant (manifests/image-cuda/) holds the same pins but torch's CUDA build and the CUDA
libraries that build needs; manifests/trainjob-gpu.yaml runs it on GPU nodes.
"""

from __future__ import annotations

from backend.project import MANIFESTS

BASE_IMAGE = "kfcockpit-base:0.1.0"

IMAGE_DIR = MANIFESTS / "image"
LOCK_FILE = IMAGE_DIR / "requirements.lock"
DOCKERFILE = IMAGE_DIR / "Dockerfile"

CUDA_IMAGE = "kfcockpit-base-cuda:0.1.0"
CUDA_IMAGE_DIR = MANIFESTS / "image-cuda"
CUDA_LOCK_FILE = CUDA_IMAGE_DIR / "requirements.lock"
CUDA_DOCKERFILE = CUDA_IMAGE_DIR / "Dockerfile"

# Lesson step 8 asks for the Ray Train component to declare ray in its packages to install. The
# pin is the lock's (a test checks), so on the pinned image pip finds it already satisfied.
RAY_PACKAGES = ["ray[train]==2.60.0"]

#!/bin/sh
# Build the controller image as koordqueue:<package version> (the version's one place is
# koordqueue/__init__.py; deploy/deployment.yaml names the same tag, a unit test checks it).
#
#   deploy/build-image.sh [IMAGE]      IMAGE defaults to koordqueue; prints IMAGE:VERSION
#
# ENGINE=podman|docker picks the engine (default: podman if present, else docker).
set -eu
cd "$(dirname "$0")/.."
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' koordqueue/__init__.py)
[ -n "$version" ] || { echo "no __version__ in koordqueue/__init__.py" >&2; exit 1; }
engine=${ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$engine" ] || { echo "neither podman nor docker is installed" >&2; exit 1; }
image="${1:-koordqueue}:$version"
"$engine" build -f deploy/Containerfile -t "$image" . >&2
echo "$image"

"""The release workflow's promises, which actionlint does not check (scripts/lint-workflows runs
this): python scripts/lint-workflows.py .github/workflows/release.yml README.md

- it runs on a pushed version tag (v*) and on nothing else;
- no permission at the top, and the job's are exactly contents: read and packages: write;
- every action is pinned to a major version (@v6) or a commit (40 hex digits), never a branch;
- the image pushed is ghcr.io/${{ github.repository_owner }}/apns-mock, for linux/amd64 and
  linux/arm64, from the Dockerfile's default target (its Swift build stage), tagged with the
  version and latest, with an SBOM (sbom: true) and provenance (mode=max);
- the README names that image (ghcr.io/<owner>/apns-mock) and keeps `docker build`.
"""
import re
import sys

import yaml

IMAGE = "ghcr.io/${{ github.repository_owner }}/apns-mock"
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
    return condition


def main(workflow_path, readme_path):
    with open(workflow_path) as file:
        workflow = yaml.safe_load(file)
    # PyYAML reads the key `on` as the boolean True (YAML 1.1).
    triggers = workflow.get("on", workflow.get(True))
    check(triggers == {"push": {"tags": ["v*"]}}, f"triggered by a pushed v* tag only: {triggers}")
    check(workflow.get("permissions") == {}, f"no permission at the top (permissions: {{}}): {workflow.get('permissions')}")
    jobs = workflow["jobs"]
    steps = []
    for name, job in jobs.items():
        check(job.get("permissions") == {"contents": "read", "packages": "write"},
              f"job {name}: permissions contents: read and packages: write only: {job.get('permissions')}")
        steps += job.get("steps", [])
    for step in steps:
        uses = step.get("uses")
        if uses:
            check(re.fullmatch(r"[\w.-]+/[\w./-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})", uses) is not None,
                  f"{uses}: pinned to a major version or a commit")
    actions = [step.get("uses", "").split("@")[0] for step in steps]
    for action in ("docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action",
                   "docker/metadata-action", "docker/build-push-action"):
        check(action in actions, f"uses {action}")
    meta = next((step for step in steps if step.get("uses", "").startswith("docker/metadata-action@")), {})
    check((meta.get("with") or {}).get("images") == IMAGE, f"the image is {IMAGE}: {(meta.get('with') or {}).get('images')}")
    tags = (meta.get("with") or {}).get("tags", "")
    check("type=match,pattern=^v(.*)$,group=1" in tags, f"tagged with the version (v1.2.0 gives 1.2.0): {tags!r}")
    check("type=raw,value=latest" in tags, f"tagged latest: {tags!r}")
    pushes = [step.get("with") or {} for step in steps
              if step.get("uses", "").startswith("docker/build-push-action@") and (step.get("with") or {}).get("push") is True]
    if check(len(pushes) == 1, f"one build-push-action step pushes: {len(pushes)}"):
        push = pushes[0]
        check(push.get("platforms") == "linux/amd64,linux/arm64", f"pushes linux/amd64 and linux/arm64: {push.get('platforms')}")
        check("target" not in push and push.get("context", ".") == ".",
              "builds the Dockerfile's default target (the Swift build stage), not `prebuilt`")
        check(push.get("sbom") is True, f"sbom: true: {push.get('sbom')}")
        check(push.get("provenance") == "mode=max", f"provenance: mode=max: {push.get('provenance')}")
        check(push.get("tags") == "${{ steps.meta.outputs.tags }}", f"pushes the metadata step's tags: {push.get('tags')}")
    with open(readme_path) as file:
        readme = file.read()
    check("ghcr.io/<owner>/apns-mock" in readme, f"{readme_path} names the published image ghcr.io/<owner>/apns-mock")
    check("docker build -t apns-mock:local ." in readme, f"{readme_path} keeps the build-it-yourself path (docker build)")
    for failure in failures:
        print(f"scripts/lint-workflows: {workflow_path}: {failure}", file=sys.stderr)
    if not failures:
        print(f"scripts/lint-workflows: {workflow_path} keeps the release's promises", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

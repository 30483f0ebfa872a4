#!/usr/bin/env node
// The container images of rendered Kubernetes manifests, and `kustomize edit set image` for
// machines without the kustomize binary (kubectl has `kustomize` but not `kustomize edit`), for
// tests/deploy_images_test.sh.
//
//   node deploy_images.js list RENDERED.yaml
//       prints "KIND/NAME CONTAINERS CONTAINER IMAGE" for every container and init container of
//       every object with a pod template (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job,
//       CronJob) or a pod spec (Pod); CONTAINERS is containers, initContainers or
//       ephemeralContainers; a container without an image prints "-"
//   node deploy_images.js set KUSTOMIZATION.yaml NAME=NEW_NAME[:NEW_TAG][@DIGEST]
//       edits the file as `kustomize edit set image NAME=NEW_NAME:NEW_TAG` does: the `images:`
//       entry named NAME (added when there is none, the list sorted by name as kustomize keeps it)
//       becomes {name, newName, newTag} or {name, newName, digest}; newName is left out when it
//       equals NAME. Comments and the other fields stay.
//
// Errors go to stderr, exit code 1.
"use strict";

const fs = require("fs");
const path = require("path");
// The validator's pinned YAML parser (installed by tools/setup.sh).
const YAML = require(path.join(__dirname, "..", "third_party", "k8s_validate", "node_modules",
  "yaml"));

function fail(message) {
  process.stderr.write(`deploy_images.js: ${message}\n`);
  process.exit(1);
}

// The pod spec of a rendered object, or null when it has none.
function podSpecOf(obj) {
  const spec = obj.spec || {};
  switch (obj.kind) {
    case "Pod":
      return spec;
    case "CronJob":
      return (((spec.jobTemplate || {}).spec || {}).template || {}).spec || null;
    default:
      return (spec.template || {}).spec || null;
  }
}

function list(file) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8"));
  const lines = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) fail(`${file}: ${doc.errors[0].message}`);
    const obj = doc.toJS();
    if (obj === null || typeof obj !== "object") continue;
    const pod = podSpecOf(obj);
    if (pod === null || typeof pod !== "object") continue;
    const name = `${obj.kind}/${(obj.metadata || {}).name}`;
    for (const field of ["containers", "initContainers", "ephemeralContainers"]) {
      for (const c of pod[field] || []) lines.push(`${name} ${field} ${c.name} ${c.image || "-"}`);
    }
  }
  process.stdout.write(lines.map((l) => `${l}\n`).join(""));
}

// NAME=NEW_NAME[:NEW_TAG][@DIGEST] as kustomize's image parser splits it: the tag is what follows
// the last ":" after the last "/" (a registry's port is not a tag).
function parseSetting(setting) {
  const eq = setting.indexOf("=");
  if (eq <= 0) fail(`expected NAME=NEW_NAME[:NEW_TAG], not "${setting}"`);
  const name = setting.slice(0, eq);
  let image = setting.slice(eq + 1);
  const entry = { name };
  const at = image.indexOf("@");
  let digest = "";
  if (at >= 0) {
    digest = image.slice(at + 1);
    image = image.slice(0, at);
  }
  const colon = image.lastIndexOf(":");
  let tag = "";
  if (colon > image.lastIndexOf("/")) {
    tag = image.slice(colon + 1);
    image = image.slice(0, colon);
  }
  if (image === "") fail(`no image name in "${setting}"`);
  if (image !== name) entry.newName = image;
  if (digest !== "") entry.digest = digest;
  else if (tag !== "") entry.newTag = tag;
  return entry;
}

function set(file, setting) {
  const entry = parseSetting(setting);
  const doc = YAML.parseDocument(fs.readFileSync(file, "utf8"));
  if (doc.errors.length > 0) fail(`${file}: ${doc.errors[0].message}`);
  if (!YAML.isMap(doc.contents)) fail(`${file}: not a kustomization (no mapping at the top)`);
  let images = doc.get("images");
  if (images === undefined) {
    images = doc.createNode([]);
    doc.set("images", images);
  }
  if (!YAML.isSeq(images)) fail(`${file}: images: is not a list`);
  const kept = images.items.filter((item) => !(YAML.isMap(item) && item.get("name") === entry.name));
  kept.push(doc.createNode(entry));
  kept.sort((a, b) => String(a.get("name")).localeCompare(String(b.get("name"))));
  images.items = kept;
  fs.writeFileSync(file, doc.toString());
}

const argv = process.argv.slice(2);
if (argv[0] === "list" && argv.length === 2) {
  list(argv[1]);
} else if (argv[0] === "set" && argv.length === 3) {
  set(argv[1], argv[2]);
} else {
  fail("usage: deploy_images.js list RENDERED.yaml | set KUSTOMIZATION.yaml NAME=NEW_NAME[:NEW_TAG]");
}

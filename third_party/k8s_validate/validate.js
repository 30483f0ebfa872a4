#!/usr/bin/env node
// Validates Kubernetes objects offline against the Kubernetes OpenAPI schema, as compiled into the
// pinned npm package kubernetes-models (and the Prometheus Operator's custom resources, from
// @kubernetes-models/prometheus-operator; see package.json), and rejects fields the schema does not
// know (the API server's strict field validation does the same; the compiled schema alone lets
// them through).
//
//   node validate.js FILE.yaml...   (multi-document YAML, e.g. the output of `kubectl kustomize`)
//   node validate.js -              (read standard input)
//
// Prints one line per error ("FILE: Kind/name: /json/path: message") and exits 1 when there is
// any, 0 otherwise. Uses no network.
"use strict";

const fs = require("fs");
const path = require("path");
const YAML = require("yaml");

// Packages of custom resources' models, by API group: the Prometheus Operator's PodMonitor and
// PrometheusRule (deploy/k8s/monitoring), from the same kubernetes-models family and version line.
const CRD_PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
};

// The model class of apiVersion/kind, e.g. apps/v1 + Deployment -> kubernetes-models/apps/v1/Deployment,
// monitoring.coreos.com/v1 + PodMonitor -> @kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor.
function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9.\/]+$/.test(apiVersion) ||
      !/^[A-Za-z0-9]+$/.test(kind)) {
    return null;
  }
  const group = apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
  const pkg = CRD_PACKAGES[group] || "kubernetes-models";
  let mod;
  try {
    mod = require(path.join(pkg, apiVersion, kind));
  } catch (e) {
    return null;
  }
  return mod[kind] || null;
}

// Wraps `value` so that every object the schema validator looks into records which keys it read
// or whether it enumerated them (maps such as labels are enumerated).
function track(value, where, seen) {
  if (value === null || typeof value !== "object") return value;
  const record = { path: where, value, read: new Set(), enumerated: false };
  seen.push(record);
  const children = new Map();
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === "string") record.read.add(key);
      const v = Reflect.get(target, key, receiver);
      if (typeof key !== "string" || v === null || typeof v !== "object") return v;
      if (!children.has(key)) children.set(key, track(v, `${where}/${key}`, seen));
      return children.get(key);
    },
    has(target, key) {
      if (typeof key === "string") record.read.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      record.enumerated = true;
      return Reflect.ownKeys(target);
    },
  });
}

// Keys of objects the validator looked into (read some key of) but never enumerated, that it did
// not read: the schema has no such property. Objects it never looked into are free-form.
function unknownFields(seen) {
  const errors = [];
  for (const r of seen) {
    if (Array.isArray(r.value) || r.enumerated || r.read.size === 0) continue;
    for (const key of Object.keys(r.value)) {
      if (!r.read.has(key)) errors.push(`${r.path}/${key}: unknown field "${key}"`);
    }
  }
  return errors;
}

function validateObject(obj) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return ["not an object"];
  const Model = modelFor(obj.apiVersion, obj.kind);
  if (Model === null) return [`unknown apiVersion/kind ${obj.apiVersion}/${obj.kind}`];
  const meta = obj.metadata;
  if (!meta || typeof meta !== "object" || (!meta.name && !meta.generateName)) {
    return ["/metadata/name: required (the API server rejects an object without a name)"];
  }
  const seen = [];
  try {
    // The validator alone, on the tracked object (the model's constructor would copy it first).
    Model.prototype.validate.call(track(obj, "", seen));
  } catch (e) {
    if (!Array.isArray(e.errors)) throw e;
    return e.errors.map((x) => `${x.instancePath || "/"}: ${x.message}`);
  }
  return unknownFields(seen);
}

function main(argv) {
  const files = argv.length > 0 ? argv : ["-"];
  let failures = 0;
  let objects = 0;
  for (const file of files) {
    const text = fs.readFileSync(file === "-" ? 0 : file, "utf8");
    const docs = YAML.parseAllDocuments(text);
    for (const doc of docs) {
      if (doc.errors.length > 0) {
        for (const e of doc.errors) console.log(`${file}: YAML: ${e.message}`);
        failures += doc.errors.length;
        continue;
      }
      const obj = doc.toJS();
      if (obj === null || obj === undefined) continue;
      objects++;
      const name = `${obj.kind}/${(obj.metadata && obj.metadata.name) || "?"}`;
      for (const e of validateObject(obj)) {
        console.log(`${file}: ${name}: ${e}`);
        failures++;
      }
    }
  }
  if (objects === 0) {
    console.log("validate.js: no objects found");
    return 1;
  }
  console.log(`validate.js: ${objects} objects, ${failures} errors`);
  return failures > 0 ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));

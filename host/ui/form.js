// A form generated from a tool's inputSchema: strings, numbers, integers,
// booleans, enums, arrays, nested objects, required markers, descriptions
// as help text, defaults. Anything it cannot express (oneOf, $ref, ...)
// becomes a JSON field for that part. Every text from the schema is set
// as text, never as HTML.

import { el } from "./dom.js";

let counter = 0;
const nextId = (prefix) => `${prefix}-${++counter}`;

const EXPRESSIBLE = new Set(["string", "number", "integer", "boolean", "array", "object"]);

/// The schema's single type, or null when it has several or none.
function typeOf(schema) {
  if (!schema || typeof schema !== "object") return null;
  if (Array.isArray(schema.enum)) return "enum";
  let type = schema.type;
  if (Array.isArray(type)) {
    const others = type.filter((t) => t !== "null");
    type = others.length === 1 ? others[0] : null;
  }
  if (!type && schema.properties) type = "object";
  if (["oneOf", "anyOf", "allOf", "$ref", "not"].some((key) => key in schema)) return null;
  return EXPRESSIBLE.has(type) ? type : null;
}

/// Builds the fields for `schema` into `container`; returns a function that
/// reads the value back (`undefined` for an empty optional field), or
/// throws an Error naming the field whose text is not valid.
export function buildForm(schema, container) {
  container.replaceChildren();
  if (typeOf(schema) !== "object") {
    return jsonField(container, "Arguments", schema, true, "{}");
  }
  return objectFields(container, schema, "");
}

function objectFields(container, schema, path) {
  const required = new Set(schema.required || []);
  const readers = [];
  for (const [name, property] of Object.entries(schema.properties || {})) {
    const read = field(container, name, property || {}, required.has(name), path ? `${path}.${name}` : name);
    readers.push([name, read]);
  }
  return () => {
    const value = {};
    for (const [name, read] of readers) {
      const v = read();
      if (v !== undefined) value[name] = v;
    }
    return value;
  };
}

function labelFor(id, name, required) {
  const label = el("label", { for: id }, name);
  if (required) {
    label.append(" ", el("span", { class: "required", "aria-hidden": "true" }, "*"));
  }
  return label;
}

function help(schema, id) {
  if (!schema.description) return null;
  return el("p", { class: "help", id }, String(schema.description));
}

function field(container, name, schema, required, path) {
  const type = typeOf(schema);
  const id = nextId("f");
  const helpId = `${id}-help`;
  const helpText = help(schema, helpId);
  const described = helpText ? { "aria-describedby": helpId } : {};
  const hasDefault = "default" in schema;
  switch (type) {
    case "enum": {
      const select = el("select", { id, name: path, ...described, ...(required ? { "aria-required": "true" } : {}) });
      if (!required) select.append(el("option", { value: "" }, "(not set)"));
      schema.enum.forEach((option, index) => {
        // A string reads as itself; any other value as its JSON.
        const opt = el("option", { value: String(index) }, typeof option === "string" ? option : JSON.stringify(option));
        if (hasDefault && JSON.stringify(schema.default) === JSON.stringify(option)) opt.selected = true;
        select.append(opt);
      });
      container.append(labelFor(id, name, required), helpText || "", select);
      return () => (select.value === "" ? undefined : schema.enum[Number(select.value)]);
    }
    case "boolean": {
      if (required) {
        const box = el("input", { id, type: "checkbox", name: path, ...described });
        box.checked = hasDefault ? Boolean(schema.default) : false;
        const label = labelFor(id, name, required);
        container.append(el("div", {}, box, " ", label), helpText || "");
        return () => box.checked;
      }
      const select = el("select", { id, name: path, ...described },
        el("option", { value: "" }, "(not set)"),
        el("option", { value: "true" }, "true"),
        el("option", { value: "false" }, "false"));
      if (hasDefault) select.value = String(Boolean(schema.default));
      container.append(labelFor(id, name, required), helpText || "", select);
      return () => (select.value === "" ? undefined : select.value === "true");
    }
    case "number":
    case "integer": {
      const attrs = { id, type: "number", name: path, step: type === "integer" ? "1" : "any", ...described };
      if (required) attrs["aria-required"] = "true";
      if ("minimum" in schema) attrs.min = String(schema.minimum);
      if ("maximum" in schema) attrs.max = String(schema.maximum);
      const input = el("input", attrs);
      if (hasDefault) input.value = String(schema.default);
      container.append(labelFor(id, name, required), helpText || "", input);
      return () => {
        if (input.value.trim() === "") return undefined;
        const n = Number(input.value);
        if (Number.isNaN(n)) throw new Error(`${path}: not a number`);
        return n;
      };
    }
    case "string": {
      const long = (schema.maxLength || 0) > 200 || /text|body|content|code/i.test(name);
      const input = long
        ? el("textarea", { id, name: path, rows: "4", ...described })
        : el("input", { id, type: "text", name: path, ...described });
      if (required) input.setAttribute("aria-required", "true");
      if (hasDefault) input.value = String(schema.default);
      container.append(labelFor(id, name, required), helpText || "", input);
      return () => (input.value === "" && !required ? undefined : input.value);
    }
    case "array":
      return arrayField(container, name, schema, required, path, helpText);
    case "object": {
      const fieldset = el("fieldset", { ...described });
      const legend = el("legend", {}, name);
      if (required) legend.append(" ", el("span", { class: "required", "aria-hidden": "true" }, "*"));
      fieldset.append(legend);
      if (helpText) fieldset.append(helpText);
      if (!schema.properties || Object.keys(schema.properties).length === 0) {
        const read = jsonField(fieldset, `${name} (JSON)`, schema, required, hasDefault ? JSON.stringify(schema.default) : "");
        container.append(fieldset);
        return read;
      }
      const read = objectFields(fieldset, schema, path);
      container.append(fieldset);
      return () => {
        const value = read();
        return !required && Object.keys(value).length === 0 ? undefined : value;
      };
    }
    default:
      return jsonField(container, `${name} (JSON)`, schema, required, hasDefault ? JSON.stringify(schema.default) : "", helpText);
  }
}

function arrayField(container, name, schema, required, path, helpText) {
  const fieldset = el("fieldset", {});
  const legend = el("legend", {}, name);
  if (required) legend.append(" ", el("span", { class: "required", "aria-hidden": "true" }, "*"));
  fieldset.append(legend);
  if (helpText) fieldset.append(helpText);
  const items = el("div", {});
  const readers = [];
  const itemSchema = schema.items && typeof schema.items === "object" ? schema.items : {};
  const add = () => {
    const index = readers.length;
    const item = el("div", { class: "array-item" });
    const entry = { read: null, removed: false };
    entry.read = field(item, `${name} #${index + 1}`, itemSchema, true, `${path}[${index}]`);
    const remove = el("button", { type: "button", class: "secondary" }, `Remove ${name} #${index + 1}`);
    remove.addEventListener("click", () => {
      entry.removed = true;
      item.remove();
    });
    item.append(remove);
    items.append(item);
    readers.push(entry);
  };
  const addButton = el("button", { type: "button", class: "secondary" }, `Add ${name}`);
  addButton.addEventListener("click", add);
  fieldset.append(items, addButton);
  container.append(fieldset);
  if (Array.isArray(schema.default)) schema.default.forEach(() => add());
  return () => {
    const values = readers.filter((r) => !r.removed).map((r) => r.read());
    return values.length === 0 && !required ? undefined : values;
  };
}

function jsonField(container, name, schema, required, initial, helpText) {
  const id = nextId("f");
  const area = el("textarea", { id, rows: "4", spellcheck: "false" });
  area.value = initial || "";
  container.append(labelFor(id, name, required), helpText || "", area);
  return () => {
    if (area.value.trim() === "") return required ? {} : undefined;
    try {
      return JSON.parse(area.value);
    } catch (error) {
      throw new Error(`${name}: ${error.message}`);
    }
  };
}

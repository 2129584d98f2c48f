// What the page takes from CodeMirror 6: an editor with the basic setup,
// Python and JavaScript, and diagnostics (a failed build's line marked).
export { EditorView, basicSetup } from "codemirror";
export { EditorState, Compartment } from "@codemirror/state";
export { keymap } from "@codemirror/view";
export { python } from "@codemirror/lang-python";
export { javascript } from "@codemirror/lang-javascript";
export { setDiagnostics, lintGutter } from "@codemirror/lint";
export { indentWithTab } from "@codemirror/commands";

// What the page takes from the official ext-apps package to host a
// tool's view: the bridge that speaks the extension's protocol to the
// view's frame, its postMessage transport, and the helpers that read a
// tool's `_meta.ui`.
export {
  AppBridge,
  PostMessageTransport,
  getToolUiResourceUri,
  isToolVisibilityAppOnly,
  isToolVisibilityModelOnly,
  RESOURCE_MIME_TYPE,
} from "@modelcontextprotocol/ext-apps/app-bridge";

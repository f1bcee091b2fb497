/* bridge.js: the view's side of MCP Apps (io.modelcontextprotocol/ui, protocol 2026-01-26).
 *
 * JSON-RPC 2.0 over postMessage with the host (window.parent): the ui/initialize handshake, then
 * ui/notifications/initialized; the host's tool-input, tool-result, tool-cancelled and
 * host-context-changed notifications; resources/read and ui/open-link requests to the host;
 * ui/notifications/size-changed as the content grows; answers to ping and ui/resource-teardown.
 * Hand-written (about 100 lines) instead of the ext-apps `App` bundle (about 540 kB with its
 * dependencies), which every resources/read of the view would carry; the browser tests drive it with
 * the ext-apps `AppBridge`, the reference host side.
 */
"use strict";
(function () {
  const PROTOCOL_VERSION = "2026-01-26";

  function createBridge(appInfo, host = window.parent) {
    let nextId = 1;
    const pending = new Map();
    const listeners = {};
    const handlers = { ping: () => ({}), "ui/resource-teardown": () => ({}) };
    const post = (message) => host.postMessage({ jsonrpc: "2.0", ...message }, "*");

    window.addEventListener("message", (event) => {
      const msg = event.data;
      if (event.source !== host || !msg || msg.jsonrpc !== "2.0") return;
      if (msg.method === undefined) {  // a response to one of our requests
        const call = pending.get(msg.id);
        if (!call) return;
        pending.delete(msg.id);
        if (msg.error) call.reject(new Error(msg.error.message || `host error ${msg.error.code}`));
        else call.resolve(msg.result);
      } else if (msg.id !== undefined) {  // a request from the host
        const handler = handlers[msg.method];
        Promise.resolve()
          .then(() => {
            if (!handler) throw Object.assign(new Error(`method not found: ${msg.method}`), { code: -32601 });
            return handler(msg.params || {});
          })
          .then((result) => post({ id: msg.id, result: result || {} }),
            (err) => post({ id: msg.id, error: { code: err.code || -32603, message: String(err.message || err) } }));
      } else {
        for (const fn of listeners[msg.method] || []) fn(msg.params || {});
      }
    });

    const bridge = {
      hostCapabilities: {},
      hostContext: {},
      request(method, params) {
        const id = nextId++;
        return new Promise((resolve, reject) => {
          pending.set(id, { resolve, reject });
          post({ id, method, params: params || {} });
        });
      },
      notify(method, params) { post({ method, params: params || {} }); },
      on(method, fn) { (listeners[method] ||= []).push(fn); },
      handle(method, fn) { handlers[method] = fn; },
      async connect() {
        const result = await bridge.request("ui/initialize", {
          appInfo, appCapabilities: { availableDisplayModes: ["inline"] }, protocolVersion: PROTOCOL_VERSION,
        });
        bridge.hostCapabilities = result.hostCapabilities || {};
        bridge.hostContext = result.hostContext || {};
        bridge.notify("ui/notifications/initialized", {});
        return result;
      },
      /* Tell the host how big the content is, whenever it changes (the host sizes the frame to it). */
      reportSize() {
        let last = "";
        let queued = false;
        const send = () => {
          queued = false;
          const el = document.documentElement;
          const before = el.style.height;
          el.style.height = "max-content";
          const height = Math.ceil(el.getBoundingClientRect().height);
          el.style.height = before;
          const size = { width: Math.ceil(window.innerWidth), height };
          const key = `${size.width}x${size.height}`;
          if (key !== last) { last = key; bridge.notify("ui/notifications/size-changed", size); }
        };
        const queue = () => { if (!queued) { queued = true; requestAnimationFrame(send); } };
        const observer = new ResizeObserver(queue);
        observer.observe(document.documentElement);
        observer.observe(document.body);
        queue();
      },
    };
    bridge.on("ui/notifications/host-context-changed", (ctx) => { Object.assign(bridge.hostContext, ctx); });
    return bridge;
  }

  window.McpAppBridge = { createBridge, PROTOCOL_VERSION };
})();

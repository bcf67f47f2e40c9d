// The GraphiQL page's bootstrap, a file of its own: the page's
// Content-Security-Policy runs only scripts served from the gateway.
//
// Queries and mutations go to the endpoint over HTTP, subscriptions over a
// websocket at the same URL (graphql-transport-ws, graphql-ws being
// bundled in graphiql.min.js). The headers typed in the Headers tab go
// with every HTTP request and, for a subscription, in connection_init's
// payload, where the gateway reads {"Authorization": "Bearer <key>"}.
(function () {
  "use strict";
  // The page's nonce, for the one <style> element GraphiQL adds (its
  // dialogs' scroll lock reads it as __webpack_nonce__): the page's CSP
  // has no style-src 'unsafe-inline'.
  window.__webpack_nonce__ = document.currentScript.nonce;
  var root = document.getElementById("graphiql");
  var url = new URL(root.getAttribute("data-endpoint"), window.location.href);
  var ws = new URL(url.href);
  ws.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  var fetcher = GraphiQL.createFetcher({ url: url.href, subscriptionUrl: ws.href });
  var placeholder = "Bearer comm_...";
  // Until the key is in, say where it goes instead of sending the request
  // (GraphiQL fetches the schema as soon as the page opens).
  var hinting = function (params, opts) {
    var headers = (opts && opts.headers) || {};
    var key = "";
    for (var name in headers) {
      if (name.toLowerCase() === "authorization") {
        key = String(headers[name]);
      }
    }
    if (key === "" || key === placeholder) {
      return Promise.resolve({ errors: [{ message:
        "Put your API key in the Headers tab in place of comm_..., then run the query; " +
        "re-fetch the schema (\u27F3 on the left) for the docs." }] });
    }
    return fetcher(params, opts);
  };
  // GraphiQL's own localStorage, less the headers: its history keeps each
  // operation's headers (the API key) whatever shouldPersistHeaders says.
  var prefix = "graphiql:";
  var withoutHeaders = function (value) {
    try {
      return JSON.stringify(JSON.parse(value), function (k, v) {
        return k === "headers" ? undefined : v;
      });
    } catch (e) {
      return value; // not JSON: a query, say
    }
  };
  var storage = {
    getItem: function (k) { return localStorage.getItem(k); },
    setItem: function (k, v) {
      if (k !== prefix + "headers") {
        localStorage.setItem(k, withoutHeaders(v));
      }
    },
    removeItem: function (k) { localStorage.removeItem(k); },
    get length() {
      return Object.keys(localStorage).filter(function (k) { return k.indexOf(prefix) === 0; }).length;
    },
    clear: function () {
      Object.keys(localStorage).forEach(function (k) {
        if (k.indexOf(prefix) === 0) {
          localStorage.removeItem(k);
        }
      });
    },
  };
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: hinting,
      defaultQuery: "{\n  project {\n    id\n  }\n}\n",
      defaultHeaders: JSON.stringify({ Authorization: placeholder }, null, 2),
      defaultEditorToolsVisibility: "headers",
      // The API key stays out of localStorage.
      shouldPersistHeaders: false,
      storage: storage,
    })
  );
})();

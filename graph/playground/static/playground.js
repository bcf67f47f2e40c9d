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
  var root = document.getElementById("graphiql");
  var url = new URL(root.getAttribute("data-endpoint"), window.location.href);
  var ws = new URL(url.href);
  ws.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  var fetcher = GraphiQL.createFetcher({ url: url.href, subscriptionUrl: ws.href });
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: "{\n  project {\n    id\n  }\n}\n",
      defaultHeaders: JSON.stringify({ Authorization: "Bearer comm_..." }, null, 2),
      defaultEditorToolsVisibility: "headers",
      // The API key stays out of localStorage.
      shouldPersistHeaders: false,
    })
  );
})();

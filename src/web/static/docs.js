// Renders Tessera's own OpenAPI document (/api-docs) with Swagger UI, served by Tessera itself.
// Relative URLs, so the page works behind a path prefix too.

/**
 * "Try it out" fills the proxy's `{path}` as one parameter, so `user/repos` goes out as
 * `user%2Frepos`, which the proxy refuses (an encoded slash is never a separator, decision 42).
 * The document says to write the path as is: this puts its slashes back, in the proxy's path
 * only (never in the query), before the request leaves the page.
 */
function proxyPathAsWritten(request) {
  const url = new URL(request.url, window.location.href);
  const at = url.pathname.search(/\/v1\/integrations\/[^/]+\/proxy\//);
  if (at === -1) return request;
  const head = url.pathname.slice(0, at);
  const rest = url.pathname.slice(at).replace(/^(\/v1\/integrations\/[^/]+\/proxy\/)(.*)$/, (_, prefix, path) => prefix + path.replace(/%2F/gi, '/'));
  url.pathname = head + rest;
  request.url = url.toString();
  return request;
}

window.ui = window.SwaggerUIBundle({
  url: 'api-docs',
  dom_id: '#swagger-ui',
  deepLinking: true,
  // No badge from the public validator: this page calls nothing but its own origin.
  validatorUrl: null,
  presets: [window.SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  displayOperationId: true,
  defaultModelsExpandDepth: 0,
  tryItOutEnabled: false,
  requestInterceptor: proxyPathAsWritten,
});

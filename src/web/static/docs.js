// Renders Tessera's own OpenAPI document (/api-docs) with Swagger UI, served by Tessera itself.
// Relative URLs, so the page works behind a path prefix too.
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
});

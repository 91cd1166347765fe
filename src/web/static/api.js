// The console's way to Tessera's JSON API and GraphQL, shared by its pages (app.js, invitation.js):
// the HttpOnly session cookie carries the session; every unsafe request carries the CSRF header.

/** A failed call: the HTTP status, the contract's error code and the server's words. */
export class ApiError extends Error {
  constructor(status, code, message, extra = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = extra.retryAfter ?? null;
    this.requestId = extra.requestId ?? null;
    /** The answer's `details` (`[{path, message}]`, which field is wrong and why; never a secret), or []. */
    this.details = extra.details ?? [];
  }
}

function readCookie(name) {
  for (const part of document.cookie.split(';')) {
    const [key, ...rest] = part.trim().split('=');
    if (key === name) return decodeURIComponent(rest.join('='));
  }
  return '';
}

async function csrfToken() {
  const fromCookie = readCookie('csrf_token');
  if (fromCookie) return fromCookie;
  // The cookie can be gone while the session lives on (cleared by hand, other tab): ask for it.
  const answer = await api('GET', '/v1/csrf');
  return answer.csrf;
}

/**
 * One JSON API call; throws ApiError with the server's code and words. `organization` names the
 * organization a system administrator entered (`X-Organization-ID`, read-only there).
 */
export async function api(method, path, body, { csrf = true, organization = null } = {}) {
  const headers = { accept: 'application/json' };
  if (organization) headers['x-organization-id'] = organization;
  const unsafe = method !== 'GET' && method !== 'HEAD';
  if (unsafe) {
    headers['content-type'] = 'application/json';
    if (csrf) headers['x-csrf-token'] = await csrfToken();
  }
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      credentials: 'same-origin',
      cache: 'no-store',
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch {
    throw new ApiError(0, 'NETWORK', 'Tessera could not be reached. Check the connection and try again.');
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (!response.ok || data === null || data.success === false) {
    throw new ApiError(
      response.status,
      typeof data?.code === 'string' ? data.code : 'UNKNOWN',
      typeof data?.error === 'string' ? data.error : `Tessera answered HTTP ${response.status}.`,
      {
        retryAfter: response.headers.get('retry-after'),
        requestId: data?.requestId ?? response.headers.get('x-request-id'),
        details: Array.isArray(data?.details) ? data.details : [],
      },
    );
  }
  return data;
}

/** One GraphQL operation; a GraphQL error becomes an ApiError with the contract's code and the server's words. */
export async function graphql(query, variables = {}, options = {}) {
  const answer = await api('POST', '/query', { query, variables }, options);
  const error = Array.isArray(answer.errors) ? answer.errors[0] : null;
  if (error) {
    const code = typeof error.extensions?.code === 'string' ? error.extensions.code : 'UNKNOWN';
    throw new ApiError(200, code, typeof error.message === 'string' ? error.message : 'Something went wrong.');
  }
  return answer.data;
}

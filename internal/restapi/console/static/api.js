// The REST calls of the console. The API key is read from sessionStorage
// and sent only in the api_key header: never in a URL, a cookie or a log.

const KEY = 'emaildata.apiKey';

export const key = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

// ApiError carries the HTTP status and the API's own message.
export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

// explain turns a refusal into a sentence a person can act on; the API's
// message is kept, since it says exactly what was wrong.
export function explain(status, apiMessage, retryAfter) {
  const said = apiMessage ? ` (the server said: ${apiMessage})` : '';
  switch (status) {
    case 0: return 'The server could not be reached. Check your connection and try again.';
    case 401: return 'This API key is not valid: it is wrong or has been revoked. Sign in again with a valid key.';
    case 403: return `This API key may not do that${said}.`;
    case 404: return `Not found${said}.`;
    case 408: return `The upload was too slow and the server stopped waiting${said}.`;
    case 409: return `Not possible now${said}.`;
    case 413: return `The file is larger than this server accepts${said}.`;
    case 415: return `The server cannot read this kind of file${said}.`;
    case 429: return `Too many requests just now; try again in ${retryAfter || 'a few'} seconds${said}.`;
    case 503: return `The server is not ready yet; try again shortly${said}.`;
    default:
      if (status >= 500) return `The server failed to answer${said}.`;
      return apiMessage ? `The server refused: ${apiMessage}` : `The server refused the request (HTTP ${status}).`;
  }
}

async function messageOf(resp) {
  const text = await resp.text();
  try { return JSON.parse(text).message || text.trim(); } catch { return text.trim(); }
}

// call sends one request with the key and returns the response, or throws
// an ApiError with a plain explanation.
export async function call(method, path, { body, headers = {}, k = key.get() } = {}) {
  let resp;
  try {
    resp = await fetch(path, {
      method, body, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      headers: { ...headers, api_key: k, Accept: 'application/json' },
    });
  } catch {
    throw new ApiError(0, explain(0));
  }
  if (!resp.ok) {
    const msg = await messageOf(resp);
    const retry = resp.headers.get('Retry-After');
    throw new ApiError(resp.status, explain(resp.status, msg, retry), retry);
  }
  return resp;
}

export const getJSON = async (path, opts) => (await call('GET', path, opts)).json();

// upload posts the file with XMLHttpRequest, whose upload events give the
// progress fetch does not; onProgress(loaded, total, bytesPerSecond).
export function upload(query, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    const start = performance.now();
    xhr.open('POST', '/v5/list?' + query.toString());
    xhr.setRequestHeader('api_key', key.get());
    xhr.setRequestHeader('Accept', 'application/json');
    xhr.upload.onprogress = (e) => {
      const secs = (performance.now() - start) / 1000;
      onProgress(e.loaded, e.lengthComputable ? e.total : file.size, secs > 0 ? e.loaded / secs : 0);
    };
    xhr.onerror = () => reject(new ApiError(0, explain(0)));
    xhr.onload = () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch { body = { message: xhr.responseText.trim() }; }
      if (xhr.status === 202) { resolve(body); return; }
      const retry = xhr.getResponseHeader('Retry-After');
      reject(new ApiError(xhr.status, explain(xhr.status, body.message, retry), retry));
    };
    const form = new FormData();
    form.append('file', file, file.name);
    xhr.send(form);
  });
}

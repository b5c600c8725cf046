package donkey.ring;

import clojure.lang.APersistentMap;
import clojure.lang.IEditableCollection;
import clojure.lang.IFn;
import clojure.lang.IKVReduce;
import clojure.lang.IMapEntry;
import clojure.lang.IObj;
import clojure.lang.IPersistentCollection;
import clojure.lang.IPersistentMap;
import clojure.lang.ISeq;
import clojure.lang.ITransientCollection;
import clojure.lang.MapEntry;
import clojure.lang.PersistentArrayMap;
import io.vertx.core.MultiMap;
import io.vertx.core.net.HostAndPort;
import io.vertx.core.net.SocketAddress;
import java.io.InputStream;
import java.util.Iterator;

/**
 * The Ring request map the kernel hands to handlers ({@link RequestMap#build}): a persistent
 * map of the SPEC's keys whose {@code :headers}, {@code :server-name} and {@code :server-port}
 * (and {@code :remote-addr} when X-Forwarded-For is trusted) are worked out the first time one
 * of them is read, so a handler that never reads them never pays for the pass over the
 * request's headers. The deprecated keys Ring's servlet adapter and http-kit still set,
 * {@code :content-type}, {@code :content-length} (a Long) and {@code :character-encoding},
 * are always present (nil when the request has no such header) and worked out from the same
 * pass each time one is read. The other values are taken from the Vert.x request when the map
 * is made. {@code :ssl-client-cert} is there only on a TLS connection whose client presented a
 * certificate (taken once per connection, at accept).
 *
 * <p>To its users it is a plain Clojure map: {@code get}, keyword lookup, {@code contains?},
 * {@code count}, {@code =} and {@code hash} (equal to the {@link PersistentArrayMap} with the
 * same entries), destructuring and printing. {@code seq}, iteration, {@code reduce-kv},
 * {@code assoc}, {@code dissoc}, {@code conj}, {@code transient} and {@code with-meta} work
 * on the whole map, built once with every value ({@link RequestMap#buildEager}'s map, same
 * key order); what {@code assoc} and friends return is that ordinary map with the change, so
 * middleware that adds keys works on a {@link PersistentArrayMap} from then on.
 *
 * <p>Threading: made on the request's event loop; any thread may read it afterwards. The
 * lazy values are computed by whichever thread reads them first, from state captured on the
 * loop (the decoded header map, which Vert.x no longer changes once the head is parsed, and
 * the connection's immutable addresses), and published through volatile fields: two threads
 * may both compute one, and they compute equal immutable values.
 */
final class LazyRequestMap extends APersistentMap
    implements IObj, IKVReduce, IEditableCollection {
  private static final long serialVersionUID = 1L;

  // taken when the map is made, on the event loop
  private final transient MultiMap headerLines;
  /** The authority of an absolute-form target, else null (the Host header names the server). */
  private final transient HostAndPort absolute;
  private final transient SocketAddress local;
  private final String uri;
  private final String queryString;
  private final Object method;
  private final Object scheme;
  private final String protocol;
  private final transient InputStream body;
  private final IPersistentMap pathParams;
  /** The socket peer's address. */
  private final String peer;
  private final boolean trustForwardedFor;
  /** The client's certificate on a TLS connection that has one, else null (no such key). */
  private final Object clientCert;

  // computed on first read
  private transient volatile RequestMap.Head head;
  private transient volatile RequestMap.Authority authority;
  private transient volatile String forwardedRemote;
  private transient volatile IPersistentMap whole;
  private static final java.lang.invoke.VarHandle HEAD;

  /**
   * The classes of the constructor's signature, resolved through this class's loader when it
   * is initialized: the JIT does not inline a method whose signature names a class its
   * holder's loader has not resolved yet, and the request path only passes some of these
   * along.
   */
  @SuppressWarnings("unused")
  private static final Class<?>[] SIGNATURE = {MultiMap.class, RequestMap.Head.class,
      HostAndPort.class, SocketAddress.class, InputStream.class, IPersistentMap.class};

  static {
    try {
      HEAD = java.lang.invoke.MethodHandles.lookup()
          .findVarHandle(LazyRequestMap.class, "head", RequestMap.Head.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  LazyRequestMap(MultiMap headerLines, RequestMap.Head head, HostAndPort absolute,
                 SocketAddress local, String uri, String queryString,
                 Object method, Object scheme, String protocol, InputStream body,
                 IPersistentMap pathParams, String peer, boolean trustForwardedFor,
                 Object clientCert) {
    this.headerLines = headerLines;
    // a plain store, not a volatile one: a volatile store is a full fence on x86, once per
    // request. A thread that gets this map without a happens-before edge and sees null only
    // scans the headers again (headerLines is final), so nothing depends on the ordering.
    HEAD.set(this, head);
    this.absolute = absolute;
    this.local = local;
    this.uri = uri;
    this.queryString = queryString;
    this.method = method;
    this.scheme = scheme;
    this.protocol = protocol;
    this.body = body;
    this.pathParams = pathParams;
    this.peer = peer;
    this.trustForwardedFor = trustForwardedFor;
    this.clientCert = clientCert;
  }

  // ---- the lazy values ----------------------------------------------------------------

  /** The one pass over the headers: the kernel's, when it made one, else made here. */
  RequestMap.Head head() {
    RequestMap.Head h = head;
    if (h == null) head = h = RequestMap.scan(headerLines);
    return h;
  }

  private RequestMap.Authority authority() {
    RequestMap.Authority a = authority;
    if (a == null) {
      authority = a = RequestMap.authority(absolute == null ? head().host : null, absolute, local);
    }
    return a;
  }

  private String remoteAddr() {
    if (!trustForwardedFor) return peer;
    String r = forwardedRemote;
    if (r == null) {
      r = RequestMap.firstForwardedFor(head().forwardedFor);
      forwardedRemote = r = r != null ? r : peer;
    }
    return r;
  }

  /** Every entry, in {@link RequestMap#buildEager}'s order: built once, on first need. */
  IPersistentMap whole() {
    IPersistentMap m = whole;
    if (m == null) {
      RequestMap.Authority a = authority();
      RequestMap.Head h = head();
      whole = m = RequestMap.entries(a.port, a.name, remoteAddr(), uri, queryString, scheme,
          method, protocol, h.headers, h.contentType, RequestMap.contentLength(h.contentLength),
          RequestMap.characterEncoding(h.contentType), body, pathParams, clientCert);
    }
    return m;
  }

  // ---- ILookup / Associative ------------------------------------------------------------

  @Override
  public Object valAt(Object key) {
    return valAt(key, null);
  }

  @Override
  public Object valAt(Object key, Object notFound) {
    // keywords are interned, so identity finds them; the most read keys come first
    if (key == RequestMap.URI) return uri;
    if (key == RequestMap.REQUEST_METHOD) return method;
    if (key == RequestMap.HEADERS) return head().headers;
    if (key == RequestMap.QUERY_STRING) return queryString;
    if (key == RequestMap.BODY) return body;
    if (key == RequestMap.PATH_PARAMS) return pathParams != null ? pathParams : notFound;
    if (key == RequestMap.SCHEME) return scheme;
    if (key == RequestMap.REMOTE_ADDR) return remoteAddr();
    if (key == RequestMap.SERVER_NAME) return authority().name;
    if (key == RequestMap.SERVER_PORT) return authority().port;
    if (key == RequestMap.PROTOCOL) return protocol;
    // the deprecated keys last: few handlers read them, and each read is cheap
    if (key == RequestMap.CONTENT_TYPE) return head().contentType;
    if (key == RequestMap.CONTENT_LENGTH) return RequestMap.contentLength(head().contentLength);
    if (key == RequestMap.CHARACTER_ENCODING) {
      return RequestMap.characterEncoding(head().contentType);
    }
    if (key == RequestMap.SSL_CLIENT_CERT && clientCert != null) return clientCert;
    return notFound;
  }

  @Override
  public boolean containsKey(Object key) {
    return key == RequestMap.URI || key == RequestMap.REQUEST_METHOD
        || key == RequestMap.HEADERS || key == RequestMap.QUERY_STRING
        || key == RequestMap.BODY || key == RequestMap.SCHEME || key == RequestMap.REMOTE_ADDR
        || key == RequestMap.SERVER_NAME || key == RequestMap.SERVER_PORT
        || key == RequestMap.PROTOCOL || key == RequestMap.CONTENT_TYPE
        || key == RequestMap.CONTENT_LENGTH || key == RequestMap.CHARACTER_ENCODING
        || key == RequestMap.PATH_PARAMS && pathParams != null
        || key == RequestMap.SSL_CLIENT_CERT && clientCert != null;
  }

  @Override
  public IMapEntry entryAt(Object key) {
    return containsKey(key) ? MapEntry.create(key, valAt(key)) : null;
  }

  @Override
  public int count() {
    return 13 + (pathParams == null ? 0 : 1) + (clientCert == null ? 0 : 1);
  }

  // ---- whole-map operations: on the built map -------------------------------------------

  @Override
  public IPersistentMap assoc(Object key, Object val) {
    return whole().assoc(key, val);
  }

  @Override
  public IPersistentMap assocEx(Object key, Object val) {
    return whole().assocEx(key, val);
  }

  @Override
  public IPersistentMap without(Object key) {
    return whole().without(key);
  }

  @Override
  public IPersistentCollection empty() {
    return PersistentArrayMap.EMPTY;
  }

  @Override
  public ISeq seq() {
    return whole().seq();
  }

  @Override
  @SuppressWarnings("rawtypes")
  public Iterator iterator() {
    return ((Iterable) whole()).iterator();
  }

  @Override
  public Object kvreduce(IFn f, Object init) {
    return ((IKVReduce) whole()).kvreduce(f, init);
  }

  @Override
  public ITransientCollection asTransient() {
    return ((IEditableCollection) whole()).asTransient();
  }

  @Override
  public IPersistentMap meta() {
    return null;
  }

  @Override
  public IObj withMeta(IPersistentMap meta) {
    return ((IObj) whole()).withMeta(meta);
  }

  /** Serialized as the plain map it stands for. */
  private Object writeReplace() {
    return whole();
  }
}

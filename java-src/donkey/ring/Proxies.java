package donkey.ring;

import io.netty.util.NetUtil;
import io.vertx.core.MultiMap;
import io.vertx.core.net.HostAndPort;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;

/**
 * The proxies whose forwarding headers a server believes ({@code :trusted-proxies}), and what
 * those headers say of a request: RFC 7239's {@code Forwarded}, else {@code X-Forwarded-For},
 * {@code -Proto}, {@code -Host} and {@code -Port}. Only a request whose socket peer is one of
 * the proxies is read this way; any other keeps the socket's values, whatever it sent.
 *
 * <p>The client is found by walking the hops from the right (the nearest first): each hop a
 * trusted proxy added is passed over, and the first address that is not a trusted proxy's is
 * the client's. Entries left of it were written by the client, or passed along from it, and
 * are never read. The scheme, host and port are the ones recorded with that hop: from the
 * same {@code Forwarded} element, or from the {@code X-Forwarded-*} entry at the same position
 * when the list has one per hop, else from its last entry (the one the nearest proxy that set
 * it wrote). Values that do not parse (a scheme other than http or https, a host that is not
 * a host, a port outside 1..65535, a {@code Forwarded} header that breaks RFC 7239's grammar)
 * are ignored, and the socket's values stay.
 *
 * <p>Threading: immutable once made; any thread.
 */
public final class Proxies {
  /** Address ranges: the network's bytes and its prefix length, by position. */
  private final byte[][] networks;
  private final int[] prefixes;

  /**
   * @param ranges IP addresses and CIDR ranges ({@code "10.0.0.0/8"}, {@code "::1"},
   *     {@code "fd00::/8"})
   * @throws IllegalArgumentException naming the first entry that is neither
   */
  public Proxies(Collection<String> ranges) {
    networks = new byte[ranges.size()][];
    prefixes = new int[ranges.size()];
    int i = 0;
    for (String r : ranges) {
      String s = r == null ? "" : r.trim();
      int slash = s.indexOf('/');
      byte[] net = NetUtil.createByteArrayFromIpAddressString(slash < 0 ? s : s.substring(0, slash));
      int bits = net == null ? -1 : net.length * 8;
      if (net != null && slash >= 0) bits = parseBits(s.substring(slash + 1), net.length * 8);
      if (net == null || bits < 0) {
        throw new IllegalArgumentException("not an IP address or CIDR range: \"" + r + "\"");
      }
      networks[i] = net;
      prefixes[i] = bits;
      i++;
    }
  }

  private static int parseBits(String s, int max) {
    if (s.isEmpty() || s.length() > 3) return -1;
    int n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < '0' || c > '9') return -1;
      n = n * 10 + (c - '0');
    }
    return n <= max ? n : -1;
  }

  /** True when {@code address} (an IP literal, no port) is one of the trusted proxies. */
  public boolean trusts(String address) {
    if (address == null || address.isEmpty()) return false;
    byte[] a = NetUtil.createByteArrayFromIpAddressString(address);
    return a != null && trusts(a);
  }

  private boolean trusts(byte[] a) {
    a = unmapped(a);
    for (int i = 0; i < networks.length; i++) {
      byte[] net = unmapped(networks[i]);
      int bits = networks[i].length == net.length ? prefixes[i] : prefixes[i] - 96;
      if (net.length == a.length && bits >= 0 && matches(net, a, bits)) return true;
    }
    return false;
  }

  /** An IPv4-mapped IPv6 address ({@code ::ffff:10.0.0.1}) as its IPv4 address. */
  private static byte[] unmapped(byte[] a) {
    if (a.length != 16) return a;
    for (int i = 0; i < 10; i++) if (a[i] != 0) return a;
    if (a[10] != (byte) 0xff || a[11] != (byte) 0xff) return a;
    return new byte[] {a[12], a[13], a[14], a[15]};
  }

  private static boolean matches(byte[] net, byte[] a, int bits) {
    int full = bits / 8;
    for (int i = 0; i < full; i++) if (net[i] != a[i]) return false;
    int rest = bits % 8;
    if (rest == 0) return true;
    int mask = 0xff << (8 - rest) & 0xff;
    return (net[full] & mask) == (a[full] & mask);
  }

  /** What the forwarding headers of a request from a trusted proxy say; immutable. */
  public static final class Forwarded {
    /** The client's address, never null (the nearest hop's when the client's is hidden). */
    public final String remote;
    /** {@code "http"} or {@code "https"}, or null for the socket's scheme. */
    public final String scheme;
    /** The host the client asked for (no brackets, no port), or null for the Host header's. */
    public final String host;
    /** The port the client connected to, or -1 when no header says. */
    public final int port;

    Forwarded(String remote, String scheme, String host, int port) {
      this.remote = remote;
      this.scheme = scheme;
      this.host = host;
      this.port = port;
    }

    /** Whether the client used https: the forwarded scheme, else the socket's ({@code ssl}). */
    boolean https(boolean ssl) {
      return scheme != null ? scheme.equals("https") : ssl;
    }

    /**
     * The host and port the client asked for, or null when no header says (the request's own
     * then stand): a forwarded host, else the one the request names ({@code asked}, its target
     * or Host header, else the local address); a forwarded port, else the one named with the
     * host that stays, else the scheme's default.
     */
    HostAndPort authority(HostAndPort asked, io.vertx.core.net.SocketAddress local,
                          boolean https) {
      if (host == null && port <= 0 && scheme == null) return null;
      String name = host;
      int p = port;
      if (name == null && asked != null && !asked.host().isEmpty()) {
        name = asked.host();
        if (p <= 0 && asked.port() > 0) p = asked.port();
      }
      if (name == null) name = local.hostAddress();
      if (p <= 0) p = https ? 443 : 80;
      return HostAndPort.create(name, p);
    }
  }

  /**
   * Event loop: the client's address, scheme, host and port according to {@code headers},
   * for a request whose socket peer is {@code peer}, a trusted proxy.
   */
  public Forwarded resolve(MultiMap headers, String peer) {
    List<String> fwd = headers.getAll("forwarded");
    if (!fwd.isEmpty()) {
      List<List<String[]>> elements = ForwardedHeader.parse(fwd);
      if (elements != null && !elements.isEmpty()) return fromForwarded(elements, peer);
    }
    return fromXForwarded(headers, peer);
  }

  private Forwarded fromForwarded(List<List<String[]>> elements, String peer) {
    String hop = peer;
    for (int i = elements.size() - 1; i >= 0; i--) {
      List<String[]> e = elements.get(i);
      String addr = nodeAddress(param(e, "for"));
      if (addr != null && trusts(addr) && i > 0) {
        hop = addr;
        continue;
      }
      String[] hostPort = hostAndPort(param(e, "host"));
      return new Forwarded(addr != null ? addr : hop, scheme(param(e, "proto")),
          hostPort == null ? null : hostPort[0],
          hostPort == null || hostPort[1] == null ? -1 : Integer.parseInt(hostPort[1]));
    }
    return new Forwarded(peer, null, null, -1);
  }

  private Forwarded fromXForwarded(MultiMap headers, String peer) {
    List<String> hops = list(headers.getAll("x-forwarded-for"));
    int n = hops.size();
    int k = 0;
    String remote = peer;
    String hop = peer;
    for (int i = n - 1; i >= 0; i--) {
      String addr = nodeAddress(hops.get(i));
      if (addr != null && trusts(addr) && i > 0) {
        hop = addr;
        continue;
      }
      k = i;
      remote = addr != null ? addr : hop;
      break;
    }
    String scheme = scheme(pick(list(headers.getAll("x-forwarded-proto")), n, k));
    String[] hostPort = hostAndPort(pick(list(headers.getAll("x-forwarded-host")), n, k));
    int port = port(pick(list(headers.getAll("x-forwarded-port")), n, k));
    if (port < 0 && hostPort != null && hostPort[1] != null) port = Integer.parseInt(hostPort[1]);
    return new Forwarded(remote, scheme, hostPort == null ? null : hostPort[0], port);
  }

  /** The entry for hop {@code k} of {@code n}: the same position, else the last entry. */
  private static String pick(List<String> values, int n, int k) {
    if (values.isEmpty()) return null;
    return values.size() == n ? values.get(k) : values.get(values.size() - 1);
  }

  /** Every comma-separated entry of {@code lines}, trimmed, empty ones dropped. */
  private static List<String> list(List<String> lines) {
    List<String> out = new ArrayList<>();
    for (String line : lines) {
      int start = 0;
      for (int i = 0; i <= line.length(); i++) {
        if (i == line.length() || line.charAt(i) == ',') {
          String v = line.substring(start, i).trim();
          if (!v.isEmpty()) out.add(v);
          start = i + 1;
        }
      }
    }
    return out;
  }

  private static String param(List<String[]> element, String name) {
    for (String[] p : element) if (p[0].equals(name)) return p[1];
    return null;
  }

  /**
   * The IP address of a node ({@code 192.0.2.1}, {@code 192.0.2.1:8080},
   * {@code [2001:db8::1]:8080}, a bare IPv6 address), or null for {@code unknown}, an
   * obfuscated identifier or anything else.
   */
  static String nodeAddress(String node) {
    if (node == null || node.isEmpty()) return null;
    String a = node;
    if (a.charAt(0) == '[') {
      int close = a.indexOf(']');
      if (close < 0) return null;
      String rest = a.substring(close + 1);
      if (!rest.isEmpty() && !(rest.charAt(0) == ':' && isPort(rest.substring(1)))) return null;
      a = a.substring(1, close);
      return NetUtil.isValidIpV6Address(a) ? a : null;
    }
    int colon = a.indexOf(':');
    if (colon >= 0 && colon == a.lastIndexOf(':')) {
      // IPv4 with a port
      if (!isPort(a.substring(colon + 1))) return null;
      a = a.substring(0, colon);
      return NetUtil.isValidIpV4Address(a) ? a : null;
    }
    return NetUtil.isValidIpV4Address(a) || NetUtil.isValidIpV6Address(a) ? a : null;
  }

  private static boolean isPort(String s) {
    return port(s) > 0;
  }

  /** A port 1..65535, or -1. */
  private static int port(String s) {
    int p = s == null ? -1 : RequestMap.parsePort(s, 0);
    return p >= 1 ? p : -1;
  }

  /** {@code "http"} or {@code "https"} for those schemes in any case, else null. */
  private static String scheme(String s) {
    if (s == null) return null;
    String l = s.toLowerCase(Locale.ROOT);
    return l.equals("http") || l.equals("https") ? l : null;
  }

  /**
   * A host with an optional port as {host, port-or-null}, IPv6 brackets removed; null when it
   * is not one (RFC 3986's host syntax, as Vert.x parses an authority).
   */
  private static String[] hostAndPort(String s) {
    if (s == null || s.isEmpty()) return null;
    HostAndPort hp = HostAndPort.parseAuthority(s, -1);
    if (hp == null || hp.host().isEmpty()) return null;
    String host = hp.host();
    if (host.length() > 1 && host.charAt(0) == '[' && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    if (hp.port() == 0) return null;
    return new String[] {host, hp.port() > 0 ? Integer.toString(hp.port()) : null};
  }
}

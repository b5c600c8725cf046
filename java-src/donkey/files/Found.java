package donkey.files;

import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.net.URLConnection;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/** A file found for a request: on disk ({@link #path}) or a classpath resource. */
final class Found {
  final Path path;
  final URL url;
  final String name;
  final long length;
  final long modified;

  Found(Path path, URL url, String name, long length, long modified) {
    this.path = path;
    this.url = url;
    this.name = name;
    this.length = length;
    this.modified = modified;
  }

  String etag(String suffix) {
    return "\"" + Long.toHexString(length) + "-" + Long.toHexString(modified) + suffix + "\"";
  }

  InputStream open(long offset, long count) throws IOException {
    if (path != null) {
      FileChannel ch = FileChannel.open(path, StandardOpenOption.READ);
      ch.position(offset);
      return new Bounded(Channels.newInputStream(ch), count);
    }
    URLConnection c = url.openConnection();
    c.setUseCaches(false);
    InputStream in = c.getInputStream();
    in.skipNBytes(offset);
    return new Bounded(in, count);
  }
}

package donkey.ring;

import java.io.File;

/**
 * A response body file its maker has just found to be a readable regular file
 * ({@code donkey.static} does, per request), so that the response writer does not look it up
 * again: two system calls a file response saved. Any other File body is checked before its
 * head is written, and gets a 500 when it cannot be sent.
 */
public final class CheckedFile extends File {
  public CheckedFile(String path) {
    super(path);
  }
}

package donkey.ring;

import java.io.File;

/**
 * A response body file its maker has just found to be a regular file ({@code donkey.static}
 * does, per request), so that the response writer does not look it up again: a system call a
 * file response saved. The writer's open checks that it can be read, for this and any other
 * File body, before the head is written; a file that cannot be sent gets a 500.
 */
public final class CheckedFile extends File {
  public CheckedFile(String path) {
    super(path);
  }
}

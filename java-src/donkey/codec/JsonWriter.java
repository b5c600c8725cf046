package donkey.codec;

import clojure.lang.IFn;
import clojure.lang.Util;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectWriter;
import java.io.IOException;
import java.io.OutputStream;

/**
 * A way of writing JSON text with its options fixed once, for callers that write many
 * documents alike. Immutable; any thread.
 */
public final class JsonWriter {
  private final ObjectWriter writer;
  private final IFn keyFn;

  JsonWriter(ObjectWriter writer, IFn keyFn) {
    this.writer = writer;
    this.keyFn = keyFn;
  }

  /**
   * Writes {@code value} as JSON text.
   *
   * @throws IllegalArgumentException when it cannot be written; an exception of the key
   *     function propagates unchanged
   */
  public String writeString(Object value) {
    try {
      return writer.writeValueAsString(root(value));
    } catch (JsonProcessingException e) {
      throw failure(value, e);
    } catch (Json.KeyFnFailure e) {
      throw Util.sneakyThrow(e.getCause());
    }
  }

  /**
   * Writes {@code value} as UTF-8 JSON to {@code out} as it goes, without flushing or closing
   * it: the caller does, once the document is whole. A value that cannot be written may
   * leave part of its document written, but never flushed by this method, so a server that
   * buffers what it is given can still answer with an error instead.
   *
   * @throws IllegalArgumentException when it cannot be written; an exception of the key
   *     function propagates unchanged
   * @throws IOException when {@code out} fails
   */
  public void writeTo(Object value, OutputStream out) throws IOException {
    try {
      writer.without(JsonGenerator.Feature.AUTO_CLOSE_TARGET)
          .without(JsonGenerator.Feature.FLUSH_PASSED_TO_STREAM)
          .writeValue(out, root(value));
    } catch (JsonProcessingException e) {
      throw failure(value, e);
    } catch (Json.KeyFnFailure e) {
      throw Util.sneakyThrow(e.getCause());
    }
  }

  /** The value Jackson is given: with a key function, the value wrapped with it. */
  private Object root(Object value) {
    return keyFn == null ? value : new ClojureModule.KeyFnRoot(value, keyFn);
  }

  /** The key function's exception when it caused {@code e}, else an unwritable value's. */
  private static RuntimeException failure(Object value, JsonProcessingException e) {
    for (Throwable t = e.getCause(); t != null; t = t.getCause()) {
      if (t instanceof Json.KeyFnFailure) throw Util.sneakyThrow(t.getCause());
    }
    return Json.unwritable(value, e);
  }
}

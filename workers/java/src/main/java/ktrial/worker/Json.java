package ktrial.worker;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The little JSON the worker channel needs (docs/drivers.md): objects, arrays, strings,
 * numbers, booleans and null. Numbers are read as Long when integral, else Double.
 * Written here rather than pulled in as a library, so the worker's JVM starts with
 * nothing but kafka-clients to load.
 */
final class Json {
  private final String s;
  private int i;

  private Json(String s) {
    this.s = s;
  }

  /** Parses one request line: a JSON object, else IllegalArgumentException. */
  @SuppressWarnings("unchecked")
  static Map<String, Object> request(String line) {
    Object req = parse(line);
    if (!(req instanceof Map)) {
      throw new IllegalArgumentException("not a JSON object");
    }
    return (Map<String, Object>) req;
  }

  /** Parses one JSON value; throws IllegalArgumentException on malformed input. */
  static Object parse(String text) {
    Json p = new Json(text);
    p.ws();
    Object v = p.value();
    p.ws();
    if (p.i != p.s.length()) {
      throw p.bad("trailing characters");
    }
    return v;
  }

  private IllegalArgumentException bad(String what) {
    return new IllegalArgumentException(what + " at character " + i);
  }

  private void ws() {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
      i++;
    }
  }

  private Object value() {
    if (i >= s.length()) {
      throw bad("unexpected end");
    }
    char c = s.charAt(i);
    switch (c) {
      case '{':
        return object();
      case '[':
        return array();
      case '"':
        return string();
      case 't':
        return literal("true", Boolean.TRUE);
      case 'f':
        return literal("false", Boolean.FALSE);
      case 'n':
        return literal("null", null);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) {
          return number();
        }
        throw bad("unexpected '" + c + "'");
    }
  }

  private Object literal(String word, Object v) {
    if (!s.startsWith(word, i)) {
      throw bad("expected " + word);
    }
    i += word.length();
    return v;
  }

  private Map<String, Object> object() {
    Map<String, Object> m = new LinkedHashMap<>();
    i++;
    ws();
    if (i < s.length() && s.charAt(i) == '}') {
      i++;
      return m;
    }
    while (true) {
      ws();
      if (i >= s.length() || s.charAt(i) != '"') {
        throw bad("expected a key");
      }
      String k = string();
      ws();
      if (i >= s.length() || s.charAt(i) != ':') {
        throw bad("expected ':'");
      }
      i++;
      ws();
      m.put(k, value());
      ws();
      if (i < s.length() && s.charAt(i) == ',') {
        i++;
        continue;
      }
      if (i < s.length() && s.charAt(i) == '}') {
        i++;
        return m;
      }
      throw bad("expected ',' or '}'");
    }
  }

  private List<Object> array() {
    List<Object> a = new ArrayList<>();
    i++;
    ws();
    if (i < s.length() && s.charAt(i) == ']') {
      i++;
      return a;
    }
    while (true) {
      ws();
      a.add(value());
      ws();
      if (i < s.length() && s.charAt(i) == ',') {
        i++;
        continue;
      }
      if (i < s.length() && s.charAt(i) == ']') {
        i++;
        return a;
      }
      throw bad("expected ',' or ']'");
    }
  }

  private String string() {
    i++; // the opening quote
    StringBuilder b = new StringBuilder();
    while (i < s.length()) {
      char c = s.charAt(i++);
      if (c == '"') {
        return b.toString();
      }
      if (c != '\\') {
        b.append(c);
        continue;
      }
      if (i >= s.length()) {
        break;
      }
      char e = s.charAt(i++);
      switch (e) {
        case 'n':
          b.append('\n');
          break;
        case 't':
          b.append('\t');
          break;
        case 'r':
          b.append('\r');
          break;
        case 'b':
          b.append('\b');
          break;
        case 'f':
          b.append('\f');
          break;
        case 'u':
          if (i + 4 > s.length()) {
            throw bad("short \\u escape");
          }
          b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
          i += 4;
          break;
        default:
          b.append(e); // \" \\ \/
      }
    }
    throw bad("unterminated string");
  }

  private Object number() {
    int start = i;
    boolean integral = true;
    while (i < s.length()) {
      char c = s.charAt(i);
      if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
        i++;
      } else if (c == '.' || c == 'e' || c == 'E') {
        integral = false;
        i++;
      } else {
        break;
      }
    }
    String t = s.substring(start, i);
    try {
      return integral ? (Object) Long.parseLong(t) : (Object) Double.parseDouble(t);
    } catch (NumberFormatException e) {
      throw bad("bad number " + t);
    }
  }

  /** Writes a value built of Map, List, String, Number, Boolean and null. */
  static String write(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v);
    return b.toString();
  }

  @SuppressWarnings("unchecked")
  private static void write(StringBuilder b, Object v) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof String) {
      quote(b, (String) v);
    } else if (v instanceof Boolean || v instanceof Long || v instanceof Integer
        || v instanceof Short) {
      b.append(v);
    } else if (v instanceof Number) {
      double d = ((Number) v).doubleValue();
      b.append(Double.isFinite(d) ? Double.toString(d) : "null");
    } else if (v instanceof Map) {
      b.append('{');
      boolean first = true;
      for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
        if (!first) {
          b.append(',');
        }
        first = false;
        quote(b, e.getKey());
        b.append(':');
        write(b, e.getValue());
      }
      b.append('}');
    } else if (v instanceof List) {
      b.append('[');
      boolean first = true;
      for (Object o : (List<Object>) v) {
        if (!first) {
          b.append(',');
        }
        first = false;
        write(b, o);
      }
      b.append(']');
    } else {
      quote(b, v.toString());
    }
  }

  private static void quote(StringBuilder b, String str) {
    b.append('"');
    for (int k = 0; k < str.length(); k++) {
      char c = str.charAt(k);
      switch (c) {
        case '"':
          b.append("\\\"");
          break;
        case '\\':
          b.append("\\\\");
          break;
        case '\n':
          b.append("\\n");
          break;
        case '\r':
          b.append("\\r");
          break;
        case '\t':
          b.append("\\t");
          break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    b.append('"');
  }
}

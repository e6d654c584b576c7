package ktrial.worker;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * TLS and SASL: the worker contract's security settings (docs/drivers.md, "Security";
 * the canonical names of ktrial's clusters/security.py) as kafka-clients properties.
 * They act together (a mechanism needs its login), so they are read as one group and
 * taken out of the settings before the per-name ones. No message carries a secret.
 */
final class Security {
  private Security() {}

  static final Set<String> KEYS = Set.of(
      "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
      "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
      "ssl.endpoint.identification.algorithm");

  /** The kafka-clients properties of the security settings in `s` (none: empty). */
  static Map<String, String> properties(Map<String, Object> s) {
    Map<String, String> out = new LinkedHashMap<>();
    if (s.containsKey("security.protocol")) {
      out.put("security.protocol", String.valueOf(s.get("security.protocol")));
    }
    if (s.containsKey("sasl.mechanism") || s.containsKey("sasl.username")) {
      String mech = String.valueOf(s.getOrDefault("sasl.mechanism", "PLAIN"));
      String module = mech.equals("PLAIN")
          ? "org.apache.kafka.common.security.plain.PlainLoginModule"
          : "org.apache.kafka.common.security.scram.ScramLoginModule";
      out.put("sasl.mechanism", mech);
      out.put("sasl.jaas.config", module + " required username="
          + quote(String.valueOf(s.getOrDefault("sasl.username", "")))
          + " password=" + quote(String.valueOf(s.getOrDefault("sasl.password", ""))) + ";");
    }
    if (s.containsKey("ssl.ca.location")) {
      out.put("ssl.truststore.type", "PEM");
      out.put("ssl.truststore.location", String.valueOf(s.get("ssl.ca.location")));
    }
    if (s.containsKey("ssl.certificate.location")) {
      // kafka-clients' PEM key store reads the key and the chain from one file
      out.put("ssl.keystore.type", "PEM");
      out.put("ssl.keystore.location", String.valueOf(s.get("ssl.certificate.location")));
    }
    if (s.containsKey("ssl.key.password")) {
      out.put("ssl.key.password", String.valueOf(s.get("ssl.key.password")));
    }
    if (s.containsKey("ssl.endpoint.identification.algorithm")) {
      String alg = String.valueOf(s.get("ssl.endpoint.identification.algorithm"));
      out.put("ssl.endpoint.identification.algorithm", alg.equals("none") ? "" : alg);
    }
    return out;
  }

  private static String quote(String v) {
    return "\"" + v.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }
}

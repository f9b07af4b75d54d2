package org.apache.kafka.common.utils;

/**
 * The one class the 4.3.1 connectors on Maven Central (connect-file, connect-mirror; 4.4.0's are not
 * published there) need and 4.4's kafka-clients moved (to utils.internals): their version() calls
 * getVersion(). Checked with javap: no other class they reference is missing from 4.4 (but
 * utils.Exit, used only by MirrorMaker's own main, which the tests do not run).
 */
public final class AppInfoParser {
  private AppInfoParser() {}

  public static String getVersion() {
    return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
  }
}

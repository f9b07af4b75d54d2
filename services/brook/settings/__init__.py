"""Where a broker setting's value comes from and how it is shown: the options (flag, BROOK_* variable,
server.properties name), their parsing into the typed BrokerSettings, and DescribeConfigs(BROKER)'s
view of them. Data only: no I/O beyond reading a properties file, nothing of the running broker."""
